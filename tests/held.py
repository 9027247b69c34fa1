"""A send held open after it took its event id: so that a later id commits first every time, not by
luck (PostgreSQL gives event ids from a sequence as rows are written, and commits one-statement
writes side by side).  A trigger of the test's database makes a send of the body :data:`HELD` wait,
after its event row is written, on an advisory lock the test holds until :meth:`Held.release`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg

import durableq
from durableq.engines.postgres.locks import begins
from durableq.limits import DEFAULT_POSTGRES_SCHEMA

from .conftest import until

#: The advisory lock a held send waits on.
HOLD = 4242
#: Sends of this body wait, after their event is written, until the test lets them commit.
HELD = "held"
_TRIGGER = f"""
CREATE OR REPLACE FUNCTION durableq_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM durableq_messages WHERE message_id = NEW.message_id AND body = '{HELD}') THEN
    PERFORM pg_advisory_xact_lock_shared({HOLD});
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS durableq_test_hold ON durableq_message_events;
CREATE TRIGGER durableq_test_hold AFTER INSERT ON durableq_message_events
  FOR EACH ROW EXECUTE FUNCTION durableq_test_hold();
"""


class Held:
    """A send of :data:`HELD` to ``queue`` (a queue with history of the database ``url``), in a thread
    of its own, held open after it wrote its event; a context manager (leaving releases it)."""

    def __init__(self, url: str, queue: durableq.Queue) -> None:
        self._admin = psycopg.connect(
            url, autocommit=True, options=f"-c search_path={DEFAULT_POSTGRES_SCHEMA}"
        )
        self._admin.execute(_TRIGGER)
        self._admin.execute(f"SELECT pg_advisory_lock({HOLD})")
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._send, args=(queue,))
        self._thread.start()
        until(lambda: self.waiting(HOLD), "the held send waits, its event id taken")

    def _send(self, queue: durableq.Queue) -> None:
        try:
            queue.send(HELD)
        except durableq.DurableQError as exc:  # reported by release()
            self.errors.append(exc)

    def waiting(self, key: int) -> bool:
        """Does a connection wait for the advisory lock ``key``?"""
        row: Any = self._admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND (classid::bigint << 32 | objid::bigint) = %s AND objsubid = 1",
            (key,),
        ).fetchone()
        return bool(row[0])

    def settling(self) -> bool:
        """Does a settled read wait for the writes under way (the held one among them)?  (Not any
        wait for the writers' lock: a broker's counter flush, a write that runs alone, waits too.)"""
        row: Any = self._admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = %s",
            (begins(DEFAULT_POSTGRES_SCHEMA).settled_barrier,),
        ).fetchone()
        return bool(row[0])

    def reader_waits_or_is_done(self, reader: threading.Thread, timeout: float = 30) -> None:
        """Return once ``reader`` has returned, or waits for the writes under way (the held one)."""
        until(lambda: not reader.is_alive() or self.settling(), "the reader read, or waits", timeout)

    def release_once(self, done: Callable[[], bool], timeout: float = 300) -> None:
        """Release the held send once a settled read waits for it, or ``done()``: for a reader that
        must run in the test's own thread."""
        until(lambda: done() or self.settling(), "the reader waits, or is done", timeout)
        self.release()

    def release(self) -> None:
        """Let the held send commit, and wait until it has."""
        if self._thread.is_alive():
            self._admin.execute(f"SELECT pg_advisory_unlock({HOLD})")
            self._thread.join(60)
        assert not self._thread.is_alive() and self.errors == []

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.release()
        finally:
            self._admin.close()
