"""A one-statement write on PostgreSQL is one call of a function of its connection's own (the writers'
lock, the statement, the NOTIFY if a long poll listens: ``engines/postgres/functions.py``), with every
guarantee of the query string it replaces: a migration holding the writers' lock is waited for before
the statement touches a table, a failed call leaves the connection idle, and a session that lost its
functions, or whose tables changed under them, goes on."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durableq
from durableq.engines.postgres.locks import writers_key
from durableq.engines.postgres.prepared import placeholders
from durableq.limits import DEFAULT_POSTGRES_SCHEMA
from durableq.ops import claim_standard

from .conftest import until

WRITERS = writers_key(DEFAULT_POSTGRES_SCHEMA)


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


_HOT = ("INSERT INTO durableq_messages", "UPDATE durableq_messages", "DELETE FROM durableq_messages")


def _functions(broker: durableq.Broker) -> list[str]:
    """The sources of the functions this thread's connection made (a session's temporary functions
    are its own: asked on it)."""
    raw = broker._rt.db.conn.raw
    rows = raw.execute(
        "SELECT prosrc FROM pg_proc WHERE pronamespace = pg_my_temp_schema() AND proname LIKE 'durableq%'"
    ).fetchall()
    return [row[0] for row in rows]


def _hot_functions(broker: durableq.Broker) -> list[int]:
    """How many functions hold the insert, the claim and the delete of a message."""
    made = _functions(broker)
    return [sum(hot in source for source in made) for hot in _HOT]


def _last_statement(broker: durableq.Broker, admin: psycopg.Connection[Any]) -> str:
    """What this thread's connection last sent, as the server saw it."""
    pid = broker._rt.db.conn.raw.info.backend_pid
    row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    assert row is not None
    return str(row[0])


def _cycle(queue: durableq.Queue, body: str) -> None:
    queue.send(body)
    (message,) = queue.receive()
    assert message.body == body
    queue.delete(message.receipt_handle)


def test_a_send_receive_and_delete_are_each_one_function_call(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs", visibility_timeout=0)  # a message comes back at once
        for n in range(2):  # a statement gets its function when it is prepared, at its second run
            _cycle(jobs, f"warm {n}")
        assert _hot_functions(broker) == [1, 1, 1]
        jobs.send("called")
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        (message,) = jobs.receive()
        assert message.body == "called" and message.receive_count == 1
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        (again,) = jobs.receive()
        assert again.message_id == message.message_id and again.receive_count == 2
        jobs.delete(again.receipt_handle)
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        assert jobs.receive() == []
        assert _hot_functions(broker) == [1, 1, 1]  # made once per connection and statement
        with durableq.open(pg_url) as other:
            other.delete_queue("jobs")
        with pytest.raises(durableq.QueueDoesNotExist):
            jobs.send("nowhere")  # the call's insert changed no row (its count says so): gone


def test_a_call_waits_for_a_migration_before_it_touches_a_table(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """A migration holds the writers' lock; a call waiting for it holds no lock of any table, so the
    migration's schema change goes through at once, and the call then runs on the changed table."""
    with durableq.open(pg_url, durability="normal", busy_timeout=30) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")
        sending = threading.Thread(target=jobs.send, args=("after the migration",), daemon=True)
        sending.start()
        until(lambda: _waiting_for_the_writers_lock(admin), "the send waits for the writers' lock")
        admin.execute("SET lock_timeout = '5s'")  # a call holding a table's lock would fail this
        admin.execute("ALTER TABLE durableq.durableq_messages ADD COLUMN test_added integer")
        admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        sending.join(30)
        assert not sending.is_alive()
        (message,) = jobs.receive()
        assert message.body == "after the migration"
        jobs.delete(message.receipt_handle)
        _cycle(jobs, "on the changed table")


def test_a_failed_call_leaves_the_connection_idle(pg_url: str, admin: psycopg.Connection[Any]) -> None:
    with durableq.open(pg_url, durability="normal", busy_timeout=0.2) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        admin.execute(f"SELECT pg_advisory_lock({WRITERS})")
        with pytest.raises(durableq.DatabaseLocked):
            jobs.send("blocked")
        admin.execute(f"SELECT pg_advisory_unlock({WRITERS})")
        assert broker._rt.db.conn.idle
        _cycle(jobs, "after")
        assert jobs.receive() == []  # the blocked send left nothing


@pytest.mark.parametrize("discard", ["DISCARD TEMP", "DISCARD TEMP; DEALLOCATE ALL", "DEALLOCATE ALL"])
def test_a_session_that_lost_its_functions_makes_them_again(
    pg_url: str, admin: psycopg.Connection[Any], discard: str
) -> None:
    """Its functions gone, or its prepared statements (the calls' own too), or both: each call that
    finds its function gone runs as a query string (which prepares its statement again), the function
    is made anew, and a call prepared again; then each operation is one call again."""
    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        for n in range(2):
            _cycle(jobs, f"warm {n}")
        broker._rt.db.conn.raw.execute(discard)
        if "TEMP" in discard:
            assert _functions(broker) == []
        for n in range(3):  # a statement prepared again at its second run, its function made at its third
            _cycle(jobs, f"after {n}")
        assert _hot_functions(broker) == [1, 1, 1]
        jobs.send("called again")
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        (message,) = jobs.receive()
        assert message.body == "called again"
        jobs.delete(message.receipt_handle)
        assert jobs.receive() == []


def test_text_with_a_nul_is_refused_on_the_call_as_on_the_query_string(pg_url: str) -> None:
    """Text with a NUL character, which PostgreSQL's text cannot hold: the call leaves it to psycopg,
    which refuses it (libpq would send the text cut at the NUL: here, another queue's name), as the
    query string does; the connection goes on."""
    statement = "UPDATE durableq_queues SET delay_seconds = delay_seconds WHERE name = :name"
    with durableq.open(pg_url, durability="normal") as broker:
        broker.create_queue("jobs")
        db = broker._rt.db
        for name in ("jobs", "jobs", "jobs"):  # the call made at the second run, used at the third
            with db.change() as conn:
                assert conn.execute(statement, {"name": name}).rowcount == 1
        with pytest.raises(durableq.InvalidParameterValue, match="cannot be stored"):
            with db.change() as conn:
                conn.execute(statement, {"name": "jobs\x00 and more"})
        assert db.conn.idle
        with db.change() as conn:
            assert conn.execute(statement, {"name": "jobs"}).rowcount == 1


def _waiting_for_the_writers_lock(admin: psycopg.Connection[Any]) -> bool:
    row = admin.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND (classid::bigint << 32 | objid::bigint) = %s AND objsubid = 1",
        (WRITERS,),
    ).fetchone()
    return row is not None and row[0] > 0


def test_a_role_without_temp_keeps_the_query_string(pg_url: str, admin: psycopg.Connection[Any]) -> None:
    """No ``TEMP`` privilege on the database: no function is made, and every call works as before."""
    role = f"plain_{admin.info.backend_pid}"
    database = admin.info.dbname
    admin.execute(
        f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA durableq TO {role}; "
        f"GRANT ALL ON ALL TABLES IN SCHEMA durableq TO {role}; "
        f"GRANT ALL ON ALL SEQUENCES IN SCHEMA durableq TO {role}; "
        f"REVOKE TEMP ON DATABASE {database} FROM PUBLIC"
    )
    try:
        url = f"postgresql://{role}@{admin.info.host}:{admin.info.port}/{database}"
        with durableq.open(pg_url) as owner:
            owner.create_queue("jobs")
        with durableq.open(url, durability="normal") as broker:
            jobs = broker.get_queue("jobs")
            for n in range(3):
                _cycle(jobs, f"plain {n}")
            assert _functions(broker) == []
            assert jobs.receive() == []
    finally:
        admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def test_the_claims_plan_counts_the_messages_in_flight_once(pg_url: str) -> None:
    """The in-flight room's count is one sub-plan of the claim, not one per mention of it in the room's
    ``CASE`` (PostgreSQL pulled the scalar sub-select up and planned it three times: three sub-plans
    to start at every claim, issue 30)."""
    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        jobs.send("one")
        conn = broker._rt.db.conn
        queue_id = broker._rt.catalog.get(conn, "jobs").id
        claim = claim_standard._CLAIM_HEAD[conn.dialect][False, "any"]
        params = {"queue_id": queue_id, "now": 0, "limit": 1, "timeout": None, "cap": 10, "sealed": False}
        plan = psycopg.ClientCursor(conn.raw).execute(f"EXPLAIN {placeholders(claim)}", params).fetchall()
        in_flight = [line for (line,) in plan if "receive_count > 0" in line]
        assert len(in_flight) == 1, "\n".join(line for (line,) in plan)


def test_a_connection_the_server_ends_under_its_calls_is_replaced(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """The call that meets the dead connection fails with a durableq error (nothing sent twice), and
    the thread's next call opens another connection, which makes its own functions."""
    with durableq.open(pg_url, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        for n in range(3):
            _cycle(jobs, f"warm {n}")
        admin.execute("SELECT pg_terminate_backend(%s)", (broker._rt.db.conn.raw.info.backend_pid,))
        try:
            jobs.send("maybe")
        except durableq.DatabaseError as exc:
            assert "cannot reach the database" in str(exc)
        for n in range(3):  # the third a call of the new connection's function
            jobs.send(f"after {n}")
        assert _last_statement(broker, admin).startswith("SELECT * FROM pg_temp.durableq_")
        bodies = Counter(m.body for m in jobs.receive(max_messages=10))
        assert all(bodies[f"after {n}"] == 1 for n in range(3)) and bodies["maybe"] <= 1
