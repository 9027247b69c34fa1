"""Adversary 38: the PostgreSQL call path (a write's pg_temp function called through libpq) where it
meets an interrupt, a server that cancels, psycopg's own prepared statements and notify wake-ups."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durableq

from .conftest import until
from .test_postgres_functions import WRITERS, _cycle, _waiting_for_the_writers_lock


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def test_ctrl_c_while_a_call_waits_cancels_it_and_the_connection_goes_on(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """Ctrl-C while a send's call waits for the writers' lock: KeyboardInterrupt reaches the caller, the
    lock's queue is left, and the next calls on the same broker work."""
    assert threading.current_thread() is threading.main_thread()
    main = threading.main_thread().ident
    assert main is not None
    with durableq.open(pg_url, durability="normal", busy_timeout=30) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")

        def interrupt() -> None:
            until(lambda: _waiting_for_the_writers_lock(admin), "the send waits for the writers' lock")
            signal.pthread_kill(main, signal.SIGINT)

        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                jobs.send("interrupted")
        finally:
            interrupter.join()
            admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        assert not _waiting_for_the_writers_lock(admin)
        jobs.send("after")
        # Usually the interrupted send was cancelled and left nothing; in about 1 run of 15 it was
        # stored all the same (its statement ran once the lock was let go; the outcome of an
        # interrupted call is unknown to its caller, as a lost answer's is).  See the adv38 report.
        assert [m.body for m in jobs.receive(max_messages=10)] in (["after"], ["interrupted", "after"])
        _cycle(jobs, "and on")


def test_a_forked_child_calls_on_its_own_connection(pg_url: str) -> None:
    """Functions and prepared statements belong to a session: a child forked after the parent made
    them must not call them on the parent's connection (nor break the parent's)."""
    import os

    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        for n in range(3):
            _cycle(jobs, f"warm {n}")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                jobs.send("from the child")
                [got] = jobs.receive(visibility_timeout=600)
                jobs.delete(got.receipt_handle)
                code = 0 if got.body == "from the child" else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        _cycle(jobs, "the parent goes on")
        assert jobs.receive() == []


def test_a_server_statement_timeout_under_a_call_is_a_durableq_error(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """The database's own statement_timeout ends a call that waits for the writers' lock: the caller
    gets a durableq error (not psycopg's QueryCanceled), nothing is stored, and the broker goes on.
    Found: the error said "cannot reach the database" (QueryCanceled is an OperationalError), sending
    whoever reads it after the network rather than the server's timeout."""
    database = admin.info.dbname
    admin.execute(f'ALTER DATABASE "{database}" SET statement_timeout = 300')
    with durableq.open(pg_url, durability="normal", busy_timeout=30) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")
        try:
            with pytest.raises(durableq.DurableQError) as raised:
                jobs.send("timed out")
        finally:
            admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        said = str(raised.value)
        assert "statement timeout" in said and "cannot reach" not in said and "not done" in said
        _cycle(jobs, "after")
        assert jobs.receive() == []


def test_two_brokers_of_one_process_on_two_schemas_keep_to_their_own(pg_url: str) -> None:
    """Each broker's calls are made on its own connections: a function or prepared statement of one
    schema's broker never runs for the other's (the same statements, the same queue names)."""
    with (
        durableq.open(pg_url, durability="normal", schema="east") as east,
        durableq.open(pg_url, durability="normal", schema="west") as west,
    ):
        a, b = east.create_queue("jobs"), west.create_queue("jobs")
        for n in range(3):  # each makes its functions on its own connection, calls interleaved
            _cycle(a, f"cycle {n}")
            _cycle(b, f"cycle {n}")
        for n in range(3):
            a.send(f"left {n}")
            b.send(f"right {n}")
        assert sorted(m.body for m in a.receive(max_messages=10)) == ["left 0", "left 1", "left 2"]
        assert sorted(m.body for m in b.receive(max_messages=10)) == ["right 0", "right 1", "right 2"]


@pytest.mark.parametrize("word", ["left", "user", "select", "table"])
def test_a_schema_named_by_a_reserved_word_is_refused_before_any_sql(pg_url: str, word: str) -> None:
    """Found: a schema name of a-z passed the check but is written unquoted, so ``left`` or ``user``
    failed in CREATE SCHEMA with PostgreSQL's "syntax error at or near" (a DatabaseError)."""
    with pytest.raises(durableq.InvalidParameterValue, match="a word SQL reserves"):
        durableq.open(pg_url, schema=word)
