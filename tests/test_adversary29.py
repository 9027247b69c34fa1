"""Adversary 29: where transactions and the shared database meet the other features.  Each test here
is a finding that fails on the current code (xfail, strict): fix the library, then drop the mark."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import durableq
from durableq import InvalidParameterValue


@pytest.mark.xfail(
    strict=True,
    reason="adversary 29: on_foreign_connection reads the search_path with the application's row "
    "factory (dict_row: 'previous' becomes the column name) and sets the path to it: the "
    "application's own tables vanish for the rest of its transaction",
)
def test_psycopg_dict_row_connection_keeps_its_search_path(
    broker: durableq.Broker, queue: durableq.Queue, target: str, engine: str
) -> None:
    if engine != "postgresql":
        pytest.skip("a psycopg connection joins a PostgreSQL broker only")
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


@pytest.mark.xfail(
    strict=True,
    reason="adversary 29: a broker.transaction() nested in another of the same thread waits for the "
    "outer one's own gate (SQLite: forever) or lock (PostgreSQL: the busy timeout), instead of "
    "being refused at once like any other call outside the open transaction",
)
def test_nested_own_transaction_is_refused_at_once(broker: durableq.Broker, queue: durableq.Queue) -> None:
    def nested() -> str:
        with broker.transaction() as outer:
            queue.send("outer", transaction=outer)
            with broker.transaction() as inner:
                queue.send("inner", transaction=inner)
        return "both committed"

    (result,) = _within(8, nested)
    assert isinstance(result, InvalidParameterValue), result
