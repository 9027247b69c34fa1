"""Adversary 29: where transactions and the shared database meet the other features.  Each test here
is a finding that fails on the current code (xfail, strict): fix the library, then drop the mark."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import durableq
from durableq import InvalidParameterValue


@pytest.mark.postgres_only("a psycopg connection joins a PostgreSQL broker only")
def test_psycopg_dict_row_connection_keeps_its_search_path(
    broker: durableq.Broker, queue: durableq.Queue, target: str
) -> None:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(target, row_factory=dict_row) as conn:
        conn.execute("CREATE TABLE orders (id int)")
        conn.commit()
        (before,) = conn.execute("SHOW search_path").fetchone().values()
        with broker.transaction(conn) as tx:
            queue.send("order 1", transaction=tx)
            (during,) = conn.execute("SHOW search_path").fetchone().values()
            assert during == before
            conn.execute("INSERT INTO orders VALUES (1)")  # the application's table, unqualified
        conn.commit()
    assert [m.body for m in queue.receive()] == ["order 1"]


def _within(seconds: float, work: Any) -> list[Any]:
    """Run ``work()`` on a thread; its result or exception, or a failure if it is still running."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s (it waits for itself)"
    return result


def test_nested_own_transaction_is_refused_at_once(broker: durableq.Broker, queue: durableq.Queue) -> None:
    def nested() -> str:
        with broker.transaction() as outer:
            queue.send("outer", transaction=outer)
            with broker.transaction() as inner:
                queue.send("inner", transaction=inner)
        return "both committed"

    (result,) = _within(8, nested)
    assert isinstance(result, InvalidParameterValue), result


def _run_worker(worker: durableq.Worker, seconds: float) -> bool:
    """Run ``worker`` on a thread for at most ``seconds``; did it return by itself (idle)?"""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    thread.join(seconds)
    returned = not thread.is_alive()
    worker.stop()
    thread.join(30)
    return returned


@pytest.mark.sqlite_only
def test_execute_commit_cannot_end_the_own_transaction(
    broker: durableq.Broker, queue: durableq.Queue
) -> None:
    with pytest.raises((RuntimeError, InvalidParameterValue)):  # the COMMIT refused, or let through
        with broker.transaction() as tx:
            tx.execute("COMMIT")
            queue.send("after the application's COMMIT", transaction=tx)
            raise RuntimeError("the application fails: its block must leave no trace")
    assert queue.receive(max_messages=10) == []


def test_transactional_handler_cannot_commit_its_effects_alone(broker: durableq.Broker, target: str) -> None:
    from tests.conftest import sql_rows, sql_run

    sql_run(target, "CREATE TABLE effects (body TEXT)")
    queue = broker.create_queue("orders")
    queue.send("order 1")
    calls: list[str] = []

    def handler(message: durableq.Message, tx: durableq.Transaction) -> None:
        calls.append(message.body)
        tx.execute("INSERT INTO effects VALUES (?)", (message.body,))
        try:
            tx.execute("COMMIT")
        except durableq.DurableQError:
            pass  # refused: the right answer
        if len(calls) == 1:
            raise RuntimeError("the handler fails after its COMMIT")

    worker = durableq.Worker(
        queue, handler, transactional=True, idle_timeout=0.5, wait_time=1, backoff=lambda n: 0
    )
    _run_worker(worker, 15)
    assert sql_rows(target, "SELECT body FROM effects") == [("order 1",)]  # exactly once


def test_transactional_handler_raising_keyboard_interrupt_releases_its_message(
    broker: durableq.Broker, clock: Any
) -> None:
    queue = broker.create_queue("orders", visibility_timeout=5)
    queue.send("order 1")
    calls: list[str] = []

    def handler(message: durableq.Message, tx: durableq.Transaction) -> None:
        calls.append(message.body)
        if len(calls) == 1:
            raise KeyboardInterrupt

    worker = durableq.Worker(
        queue, handler, transactional=True, idle_timeout=0.5, wait_time=1, backoff=lambda n: 0
    )
    returned = _run_worker(worker, 15)
    assert calls == ["order 1", "order 1"] and returned


def test_a_table_created_through_tx_execute_is_the_applications(broker: durableq.Broker, target: str) -> None:
    # On PostgreSQL it must not land in durableq's schema; on SQLite the file is one namespace.
    with broker.transaction() as tx:
        tx.execute("CREATE TABLE invoices (id INTEGER)")
        tx.execute("INSERT INTO invoices VALUES (1)")
    if target.startswith("postgresql://"):
        import psycopg

        app: Any = psycopg.connect(target)  # the application's connection: its default search_path
    else:
        import sqlite3

        app = sqlite3.connect(target)
    try:
        assert [tuple(row) for row in app.execute("SELECT id FROM invoices").fetchall()] == [(1,)]
    finally:
        app.close()


@pytest.mark.parametrize(
    "sql",
    [
        "COMMIT",
        "  /* a comment */ -- another\n rollback",
        "END TRANSACTION",
        "SAVEPOINT mine",
        "RELEASE mine",
        "BEGIN",
        "INSERT INTO orders VALUES (1); COMMIT",
    ],
)
def test_execute_refuses_what_would_end_or_split_the_transaction(
    broker: durableq.Broker, queue: durableq.Queue, target: str, sql: str
) -> None:
    from tests.conftest import sql_rows, sql_run

    sql_run(target, "CREATE TABLE orders (id INTEGER)")
    with broker.transaction() as tx:
        tx.execute("INSERT INTO orders VALUES (?)", (0,))
        with pytest.raises(InvalidParameterValue, match=r"tx\.execute"):
            tx.execute(sql)
        tx.execute("INSERT INTO orders VALUES (?)", (2,))  # the transaction goes on
        queue.send("kept", transaction=tx)
    assert sql_rows(target, "SELECT id FROM orders ORDER BY id") == [(0,), (2,)]
    assert [m.body for m in queue.receive()] == ["kept"]


def test_execute_takes_semicolons_and_words_inside_literals(broker: durableq.Broker, target: str) -> None:
    from tests.conftest import sql_rows, sql_run

    sql_run(target, "CREATE TABLE notes (body TEXT)")
    with broker.transaction() as tx:
        tx.execute("INSERT INTO notes VALUES ('COMMIT; ROLLBACK')")
        tx.execute("/* commit */ INSERT INTO notes VALUES (?) -- ; COMMIT", ("x",))
    assert sorted(sql_rows(target, "SELECT body FROM notes")) == [("COMMIT; ROLLBACK",), ("x",)]
