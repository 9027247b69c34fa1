"""A PostgreSQL write sends ``NOTIFY`` only while a long poll may be waiting (a process's change
watcher has registered: see ``durableq.engines.postgres.locks``), and no wake-up is lost to it: a
listener's registration waits for the writes under way, so a write either sees the listener and
notifies, or commits before the listener's waiters first look."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import durableq
from durableq.engines.postgres.locks import begins
from durableq.engines.postgres.notify import channel
from durableq.limits import DEFAULT_POSTGRES_SCHEMA

from .conftest import until, until_long_polls_wait

CHANNEL = channel(DEFAULT_POSTGRES_SCHEMA)
LISTENERS = begins(DEFAULT_POSTGRES_SCHEMA).listeners
#: An advisory lock of the test's own, which a trigger on durableq's messages waits for at COMMIT.
HOLD = 424242


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


class _Ear:
    """A plain ``LISTEN`` on durableq's channel, registered as no listener: it hears what is sent."""

    def __init__(self, url: str) -> None:
        self.heard: list[str] = []  # the payloads
        self.senders: list[int] = []  # the backend of each
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.add_notify_handler(lambda n: (self.heard.append(n.payload), self.senders.append(n.pid)))
        self._conn.execute(f"LISTEN {CHANNEL}")

    def everything_until_now(self, marker: str) -> list[int]:
        """The senders of what was heard of every commit before this call: a marker notified now comes
        after them (notifications arrive in commit order); and forget them."""
        with psycopg.connect(self._conn.info.dsn, autocommit=True) as other:
            other.execute(f"NOTIFY {CHANNEL}, '{marker}'")
        until(lambda: self._conn.execute("SELECT 1") and marker in self.heard, f"{marker} is heard")
        senders = self.senders[: self.heard.index(marker)]
        self.heard.clear()
        self.senders.clear()
        return senders

    def close(self) -> None:
        self._conn.close()


def _registered(admin: psycopg.Connection[Any]) -> int:
    """How many sessions hold the listeners' lock (each a process whose long polls listen)."""
    row = admin.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ShareLock' "
        "AND (classid::bigint << 32 | objid::bigint) = %s AND objsubid = 1",
        (LISTENERS,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _sessions(admin: psycopg.Connection[Any]) -> list[int]:
    """The backends of durableq's connections to the test's database."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = 'durableq'"
    ).fetchall()
    return [row[0] for row in rows]


def _long_poll(url: str, queue: str, got: list[str]) -> threading.Thread:
    def poll() -> None:
        with durableq.open(url, busy_timeout=30) as broker:
            got.extend(m.body for m in broker.get_queue(queue).receive(wait_time=20))

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread


def test_a_write_notifies_only_while_a_long_poll_listens(pg_url: str, admin: psycopg.Connection[Any]) -> None:
    ear = _Ear(pg_url)
    got: list[str] = []
    try:
        with durableq.open(pg_url) as broker:
            jobs, waits = broker.create_queue("jobs"), broker.create_queue("waits")
            jobs.send("nobody waits")
            (message,) = jobs.receive()
            jobs.delete(message.receipt_handle)
            assert ear.everything_until_now("first") == []  # three writes, no NOTIFY
            (sender,) = _sessions(admin)  # this thread's connection
            poll = _long_poll(pg_url, "waits", got)
            until_long_polls_wait()
            assert _registered(admin) == 1
            assert jobs.receive() == []  # a write that changed nothing: no NOTIFY (nor a wake-up loop)
            assert ear.everything_until_now("between") == []
            waits.send("someone waits")
            poll.join(30)
            assert got == ["someone waits"]
            assert sender in ear.everything_until_now("second")  # the send notified
        until(lambda: _registered(admin) == 0, "the closed broker's listener is gone")
    finally:
        ear.close()


@pytest.mark.parametrize("warm", [False, True], ids=["query string", "function call"])
def test_a_registration_waits_for_the_writes_under_way(
    pg_url: str, admin: psycopg.Connection[Any], warm: bool
) -> None:
    """The race: a send has checked for listeners (none) and not yet committed when a long poll
    starts.  The poll's registration waits for that commit, so its first look finds the message.
    ``warm``: the send is its connection's second, one call of its function (``functions.py``)."""
    admin.execute(
        "CREATE FUNCTION durableq.test_hold() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN PERFORM pg_advisory_xact_lock_shared({HOLD}); RETURN NULL; END $$; "
        "CREATE CONSTRAINT TRIGGER test_hold AFTER INSERT ON durableq.durableq_messages "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION durableq.test_hold()"
    )
    got: list[str] = []
    with durableq.open(pg_url, busy_timeout=30) as broker:
        jobs, warmed = broker.create_queue("jobs"), broker.create_queue("warm-up")
        held, warmed_up = threading.Event(), threading.Event()

        def send() -> None:  # on this thread's connection: its first send, or its second
            if warm:
                warmed.send("the same insert, another queue")
            warmed_up.set()
            held.wait(30)
            jobs.send("under way")

        sending = threading.Thread(target=send, daemon=True)
        sending.start()
        assert warmed_up.wait(30)
        admin.execute(f"SELECT pg_advisory_lock({HOLD})")  # the send stops at its COMMIT
        held.set()
        until(lambda: _waiting_to_commit(admin), "the send waits at its commit (it checked: no listener)")
        assert _waiting(admin, "pg_temp.durableq_") == warm  # the function's call, or the query string
        poll = _long_poll(pg_url, "jobs", got)
        until(lambda: _waiting(admin, "pg_advisory_lock"), "the registration waits for the send")
        assert _registered(admin) == 0 and got == []
        admin.execute(f"SELECT pg_advisory_unlock({HOLD})")
        sending.join(30)
        poll.join(30)
        assert not poll.is_alive() and got == ["under way"]


def _waiting_to_commit(admin: psycopg.Connection[Any]) -> bool:
    """Is a session waiting for the test's lock (the trigger, at a commit)?"""
    row = admin.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND (classid::bigint << 32 | objid::bigint) = %s AND objsubid = 1",
        (HOLD,),
    ).fetchone()
    return row is not None and row[0] > 0


def _waiting(admin: psycopg.Connection[Any], statement: str) -> bool:
    """Is a durableq session waiting for a lock in a query that includes ``statement``?"""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'durableq' "
        "AND wait_event_type = 'Lock' AND position(%s in query) > 0",
        (statement,),
    ).fetchone()
    return row is not None and row[0] > 0
