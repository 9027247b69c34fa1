"""A thread's PostgreSQL connection is idle whenever it is handed out: a transaction that fails at any
step (its lock, its statements, its commit) is rolled back, or its connection replaced, before the
call raises; so one error never breaks the calls after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durableq
from durableq import SendEntry
from durableq.engines.postgres.locks import writers_key
from durableq.limits import DEFAULT_POSTGRES_SCHEMA

from .conftest import until

WRITERS = writers_key(DEFAULT_POSTGRES_SCHEMA)


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def _left_in_a_transaction(admin: psycopg.Connection[Any]) -> list[str]:
    """The states of durableq's connections that sit inside a transaction (none should)."""
    rows = admin.execute(
        "SELECT state FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'durableq' AND state LIKE 'idle in transaction%'"
    ).fetchall()
    return [row[0] for row in rows]


def _holders_of_the_writers_lock(admin: psycopg.Connection[Any]) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND (classid::bigint << 32 | objid::bigint) = %s AND objsubid = 1",
        (WRITERS,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_lock_timeout_leaves_the_thread_able_to_go_on(pg_url: str, admin: psycopg.Connection[Any]) -> None:
    with durableq.open(pg_url, durability="normal", busy_timeout=0.3) as broker:
        jobs = broker.create_queue("jobs", history=True)
        jobs.send("before")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")  # the writers' lock, held elsewhere
        for attempt in (
            lambda: jobs.send("blocked"),  # a one-statement write: the lock shared
            lambda: jobs.send_batch([SendEntry("1", "blocked")]),  # a write that runs alone
            lambda: jobs.send("blocked again"),
            lambda: broker.message_events(),  # a reader that waits for writes under way
        ):
            with pytest.raises(durableq.DatabaseLocked, match="lock"):
                attempt()
            assert _left_in_a_transaction(admin) == []
        assert broker.list_queues() == ["jobs"]  # reads that take no lock go on meanwhile
        admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        # Nor did a settled read keep its lock (a counter flush waiting meanwhile holds it a moment).
        until(lambda: _holders_of_the_writers_lock(admin) == 0, "nobody holds the writers' lock")
        jobs.send("after")  # the same thread, the same broker
        assert sorted(m.body for m in jobs.receive(max_messages=10)) == ["after", "before"]
        assert [e.event for e in broker.message_events()] == ["sent", "sent", "received", "received"]
    assert _left_in_a_transaction(admin) == []


def test_a_commit_that_fails_leaves_the_connection_idle(pg_url: str, admin: psycopg.Connection[Any]) -> None:
    """A constraint checked at COMMIT (deferred) fails the commit itself."""
    admin.execute(
        "CREATE TABLE test_checked (n int); "
        "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$; "
        "CREATE CONSTRAINT TRIGGER test_refuse AFTER INSERT ON test_checked "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_refuse()"
    )
    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        with pytest.raises(durableq.DatabaseError, match="refused at commit"):
            with broker._rt.db.change() as conn:
                conn.execute("INSERT INTO test_checked VALUES (1)")
        assert _left_in_a_transaction(admin) == []
        jobs.send("after")
        assert [m.body for m in jobs.receive()] == ["after"]
    assert admin.execute("SELECT count(*) FROM test_checked").fetchone() == (0,)


def test_a_change_commits_each_statement_and_a_one_write_block_as_one(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """SQLite's rule for a change, which the operations are written against: each statement commits
    on its own (on PostgreSQL in one round trip with its BEGIN and COMMIT), and the statements of a
    ``one_write()`` block (a send and its history event) commit together or not at all."""
    from durableq.engines.postgres.database import Database

    admin.execute("CREATE TABLE public.test_rows (n int PRIMARY KEY)")
    db = Database(pg_url, durability="normal", busy_timeout=5)
    try:
        with pytest.raises(durableq.DurableQError), db.change() as conn:
            conn.execute("INSERT INTO public.test_rows VALUES (1)")
            with conn.one_write():
                conn.execute("INSERT INTO public.test_rows VALUES (2)")
                conn.execute("INSERT INTO public.test_rows VALUES (1)")  # taken: the block fails
        with db.change() as conn:
            with conn.one_write():
                conn.execute("INSERT INTO public.test_rows VALUES (3)")
                conn.execute("INSERT INTO public.test_rows VALUES (4)")
            conn.execute("INSERT INTO public.test_rows VALUES (5)")
        assert db.conn.idle
    finally:
        db.close()
    rows = admin.execute("SELECT n FROM public.test_rows ORDER BY n").fetchall()
    assert [n for (n,) in rows] == [1, 3, 4, 5]
    assert _left_in_a_transaction(admin) == []


def test_statements_that_a_failed_round_trip_skipped_are_not_taken_for_prepared(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """A statement and its BEGIN and lock go to the server together: when the lock times out, the
    server skips the rest, including the statement's first preparation (psycopg prepares a statement
    at its sixth run), so the driver's idea of what is prepared is wrong: that connection is replaced."""
    with durableq.open(pg_url, durability="normal", busy_timeout=0.05) as broker:
        jobs = broker.create_queue("jobs")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")
        for _ in range(8):  # past psycopg's prepare threshold
            with pytest.raises(durableq.DatabaseLocked):
                jobs.send("blocked")
        admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        for n in range(8):
            jobs.send(f"after {n}")
        assert len(jobs.receive(max_messages=10)) == 8
    assert _left_in_a_transaction(admin) == []


_HOT = ("INSERT INTO durableq_messages", "UPDATE durableq_messages", "DELETE FROM durableq_messages")


def _hot_statements_prepared(broker: durableq.Broker) -> list[bool]:
    """Has this thread's connection prepared the insert, the claim and the delete of a message?  (A
    session's prepared statements are its own: asked on it.)"""
    raw = broker._rt.db.conn.raw
    rows = raw.execute("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'durableq%'").fetchall()
    return [any(hot in text for (text,) in rows) for hot in _HOT]


def test_a_send_receive_and_delete_each_run_a_statement_prepared_once(pg_url: str) -> None:
    """Each one-statement write goes in one round trip with its statement prepared on the connection
    (from its second run), and a rollback on the connection (after which psycopg deallocates every
    prepared statement of the session, its own and durableq's) costs nothing but a fresh PREPARE."""
    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            jobs.send(f"warm {n}")
            (message,) = jobs.receive()
            jobs.delete(message.receipt_handle)
        assert _hot_statements_prepared(broker) == [True, True, True]
        for n in range(8):  # psycopg prepares a statement of a transaction of several at its sixth run
            jobs.send_batch([SendEntry("1", f"batch {n}")])
            jobs.set_attributes(visibility_timeout=30 + n)
        with pytest.raises(durableq.InvalidAttributeValue):
            jobs.set_attributes(visibility_timeout=-1)  # refused after its first statements: rolled back
        jobs.send("after")
        received = jobs.receive(max_messages=10)
        for message in received:
            jobs.delete(message.receipt_handle)
        assert len(received) == 9
        for n in range(2):
            jobs.send(f"again {n}")
            (message,) = jobs.receive()
            jobs.delete(message.receipt_handle)
        assert _hot_statements_prepared(broker) == [True, True, True]  # prepared again
        assert jobs.receive() == []
