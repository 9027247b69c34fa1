"""Adversary 37: a one-statement write as a function of its PostgreSQL session (``engines/postgres/
functions.py``), and the FIFO receive's catalog skip (``ops/queue_rows.py``), where they meet the rest
(each test here failed on the code it was written against, but those that say "Held": attacks that
found nothing, kept as guards)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

import durableq
from durableq.engines.postgres.locks import writers_key
from durableq.limits import DEFAULT_POSTGRES_SCHEMA
from durableq.ops import queue_rows
from tests.conftest import until


def _cycle(queue: durableq.Queue, body: str) -> None:
    queue.send(body)
    (message,) = queue.receive()
    assert message.body == body
    queue.delete(message.receipt_handle)


def _last_statement(broker: durableq.Broker, admin: psycopg.Connection[Any]) -> str:
    """What this thread's connection last sent, as the server saw it."""
    pid = broker._rt.db.conn.raw.info.backend_pid
    row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize("functions", [True, False], ids=["function", "query-string"])
def test_a_session_goes_on_when_a_migration_changes_the_type_of_a_column_its_statements_return(
    pg_url: str, functions: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration (here by hand) alters a column the claim returns (``receive_count``, integer to
    bigint) while a process runs.  Before: its connections refused every later send, receive and
    delete until the process ended ("structure of query does not match function result type" from
    the function; "cached plan must not change result type" from the prepared statement where the
    query string runs it).  Now the call that meets the change prepares its statement again and goes
    through, and the function of the statement as it now is is made at its next run."""
    if not functions:
        from durableq.engines.postgres import functions as made

        monkeypatch.setattr(made, "framed", lambda begin, end: False)  # no function: the query string
    with (
        durableq.open(pg_url, durability="normal") as broker,
        psycopg.connect(pg_url, autocommit=True) as admin,
    ):
        jobs = broker.create_queue("jobs")
        for n in range(3):  # prepared at the second run, the function made (and called) at the third
            _cycle(jobs, f"warm {n}")
        admin.execute("ALTER TABLE durableq.durableq_messages ALTER COLUMN receive_count TYPE bigint")
        _cycle(jobs, "the first cycle after the migration")
        jobs.send("again")
        (message,) = jobs.receive()
        assert message.body == "again" and message.receive_count == 1
        assert _last_statement(broker, admin).startswith(
            "SELECT * FROM pg_temp.durableq_" if functions else "BEGIN"
        )
        jobs.delete(message.receipt_handle)
        assert jobs.receive() == []


def test_a_failed_call_commits_nothing_and_the_next_call_is_right(pg_url: str) -> None:
    """A call cancelled while it waits for the writers' lock (``pg_cancel_backend``, as a
    ``statement_timeout`` or an operator would): a durableq error, nothing written, the connection
    idle, and the same thread's next call right.  (Held on the code it was written against.)"""
    writers = writers_key(DEFAULT_POSTGRES_SCHEMA)
    with (
        durableq.open(pg_url, durability="normal", busy_timeout=30) as broker,
        psycopg.connect(pg_url, autocommit=True) as admin,
        ThreadPoolExecutor(1) as thread,  # one thread: one connection, its functions made
    ):
        jobs = broker.create_queue("jobs")
        for n in range(3):
            thread.submit(_cycle, jobs, f"warm {n}").result()
        pid = thread.submit(lambda: broker._rt.db.conn.raw.info.backend_pid).result()
        admin.execute(f"SELECT pg_advisory_lock({writers})")
        try:
            sending = thread.submit(jobs.send, "cancelled")

            def waiting() -> bool:
                row = admin.execute(
                    "SELECT wait_event_type = 'Lock' AND query LIKE 'SELECT * FROM pg_temp.durableq_%%' "
                    "FROM pg_stat_activity WHERE pid = %s",
                    (pid,),
                ).fetchone()
                return row is not None and bool(row[0])

            until(waiting, "the send's function call waits for the writers' lock")
            admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
            with pytest.raises(durableq.DatabaseError):
                sending.result(30)
        finally:
            admin.execute(f"SELECT pg_advisory_unlock({writers})")
        thread.submit(_cycle, jobs, "after").result()
        assert jobs.receive() == []  # the cancelled send left nothing


@pytest.mark.sqlite_only("the catalog skip reads PRAGMA data_version: SQLite's only")
def test_a_fifo_receive_never_takes_a_row_older_than_its_own_change(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog skip of a FIFO receive (a row checked on this connection, no commit elsewhere, no
    change of its own since: taken unchecked) took whatever row the broker's cache held, and another
    thread may cache an older row after this connection's check: a ``get`` that read the row before
    this connection's ``set_attributes`` committed stores it after.  Then every FIFO receive of the
    thread took the old settings until another connection committed anything: here a visibility
    timeout of 0 the thread itself had raised to 600 s, so a message received was handed out
    again at once, inside its visibility window."""
    with durableq.open(db_path, durability="normal") as broker:
        jobs = broker.create_queue(
            "jobs.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=0
        )
        for group in ("a", "b", "c"):
            jobs.send(f"in {group}", group_id=group)
        armed, opened, held = threading.Event(), threading.Event(), threading.Event()
        load = queue_rows.load

        def held_after_reading(conn: Any, name: str) -> Any:
            row = load(conn, name)
            if armed.is_set():  # the other thread's read only
                armed.clear()
                held.set()
                opened.wait(30)
            return row

        monkeypatch.setattr(queue_rows, "load", held_after_reading)
        broker._rt.catalog.forget("jobs.fifo")
        armed.set()
        reader = threading.Thread(target=jobs.attributes, daemon=True)  # reads the row, cached later
        reader.start()
        try:
            assert held.wait(30)
            jobs.set_attributes(visibility_timeout=600)
            assert len(jobs.receive()) == 1  # the new row cached (the cache was empty)
            assert len(jobs.receive()) == 1  # ... and checked on this connection, at its mark
        finally:
            opened.set()
            reader.join(30)
        (taken,) = jobs.receive()  # the reader has cached the row it read before the change
        assert jobs.receive() == [], f"{taken.body!r} handed out again inside its 600-s window"
        assert jobs.attributes()["visibility_timeout"] == 600


def test_a_terminated_session_is_replaced_and_its_functions_made_again(pg_url: str) -> None:
    """The server ends the session that made the functions (``pg_terminate_backend``, as a restart or
    an idle-session timeout would): the call that meets it fails with a durableq error, before it
    sent anything; the next ones run on a new session, which makes its own functions.  (Held.)"""
    with (
        durableq.open(pg_url, durability="normal") as broker,
        psycopg.connect(pg_url, autocommit=True) as admin,
    ):
        jobs = broker.create_queue("jobs")
        for n in range(3):
            _cycle(jobs, f"warm {n}")
        admin.execute("SELECT pg_terminate_backend(%s)", (broker._rt.db.conn.raw.info.backend_pid,))
        with pytest.raises(durableq.DatabaseError):
            jobs.send("met the closed session")
        for n in range(3):
            _cycle(jobs, f"after {n}")
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        assert jobs.receive() == []  # the failed send left nothing


def test_a_send_through_its_function_notifies_a_listener_of_another_session(pg_url: str) -> None:
    """A listener registered as a process's change watcher registers (``LISTEN``, then the listeners'
    lock): a send made by a function call notifies it.  (Held; a lost ``NOTIFY`` would be hidden from
    a long poll by the watcher's once-a-second probe, so the notification itself is looked at.)"""
    from durableq.engines.postgres.locks import begins
    from durableq.engines.postgres.notify import channel

    with (
        durableq.open(pg_url, durability="normal") as broker,
        psycopg.connect(pg_url, autocommit=True) as listener,
        psycopg.connect(pg_url, autocommit=True) as admin,
    ):
        jobs = broker.create_queue("jobs")
        for n in range(3):
            _cycle(jobs, f"warm {n}")
        listener.execute(f"LISTEN {channel(DEFAULT_POSTGRES_SCHEMA)}")
        listener.execute(begins(DEFAULT_POSTGRES_SCHEMA).listen)
        jobs.send("wake up")
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        assert len(list(listener.notifies(timeout=30, stop_after=1))) == 1
