"""Receiving: one atomic claim per attempt, dead-letter moves in the same
transaction, and long polling that wakes on commits from any process."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from .. import limits
from ..engines.sqlite import Database
from ..errors import OverLimit
from ..types import Message
from . import fifo, redrive, relocation
from .counters import EMPTY_RECEIVES, RECEIVED, Counters
from .messages import COLUMNS, claim_set, to_message
from .queue_rows import Catalog, QueueConfig
from .retention import Sweeper, expired_before, unexpired_sql
from .stats import IN_FLIGHT_ROOM_SQL, in_flight_count, in_flight_room

# Settings come from the live queue row inside the statement, so a cached row
# that went stale cannot make a claim wrong; a deleted queue (ids are never
# reused) matches nothing, and the caller then re-reads the row.
_LIVE = "(SELECT {} FROM queues WHERE id = :queue_id)"
_HEAD_WHERE = f"""queue_id = :queue_id AND visible_at <= :now
  AND {unexpired_sql(_LIVE.format("retention_period"))}"""
# The head of ix_messages_visible: visible, unexpired rows, earliest visible first.
_HEAD = f"SELECT id, receive_count FROM messages WHERE {_HEAD_WHERE} ORDER BY visible_at LIMIT :limit"
# The in-flight limit is part of the claim: the statement takes only as many as fit.
_CLAIM_HEAD = f"""
UPDATE messages SET {claim_set(f":now + coalesce(:timeout, {_LIVE.format('visibility_timeout')}) * 1000")}
WHERE id IN (
  SELECT id FROM messages WHERE {_HEAD_WHERE} AND {redrive.NOT_EXHAUSTED_SQL}
  ORDER BY visible_at LIMIT {IN_FLIGHT_ROOM_SQL})
RETURNING {COLUMNS}
"""
_READY_STANDARD = f"SELECT EXISTS (SELECT 1 FROM messages WHERE {_HEAD_WHERE})"
_READY_FIFO = "SELECT EXISTS (SELECT 1 FROM fifo_groups WHERE queue_id = :queue_id AND available_at <= :now)"
_NEXT_STANDARD = "SELECT min(visible_at) FROM messages WHERE queue_id = ? AND visible_at > ?"
_NEXT_FIFO = "SELECT min(available_at) FROM fifo_groups WHERE queue_id = ? AND available_at > ?"


#: Ticks of an idle long poll between two reads of ``PRAGMA data_version``.
_VERSION_EVERY = 20


class Receiver:
    """Receives from the queues of one broker: claims, and waits when asked to."""

    def __init__(
        self,
        db: Database,
        clock_ms: Callable[[], int],
        catalog: Catalog,
        sweeper: Sweeper,
        counters: Counters,
    ) -> None:
        self._db = db
        self._clock_ms = clock_ms
        self._catalog = catalog
        self._sweeper = sweeper
        self._counters = counters

    def receive(
        self,
        name: str,
        max_messages: int,
        visibility_timeout: int | None,
        wait_time: int | None,
        attempt_id: str | None,
    ) -> list[Message]:
        messages, queue = self._attempt(name, max_messages, visibility_timeout, attempt_id, wait_time)
        if messages:
            return messages
        wait = queue.receive_wait_time if wait_time is None else wait_time
        deadline = time.monotonic() + wait
        while wait:
            # Read the version before looking: a commit after this read wakes _wait,
            # one before it is seen by _ready.
            version = self._db.data_version()
            if self._ready(queue):
                messages, queue = self._attempt(name, max_messages, visibility_timeout, attempt_id, wait)
                if messages:
                    return messages
            if time.monotonic() >= deadline:
                break
            self._wait(version, deadline, self._next_visible(queue))
        self._counters.add(queue.name, self._clock_ms(), EMPTY_RECEIVES)
        return []

    def _attempt(
        self,
        name: str,
        limit: int,
        visibility_timeout: int | None,
        attempt_id: str | None,
        wait_time: int | None,
    ) -> tuple[list[Message], QueueConfig]:
        db, catalog = self._db, self._catalog
        with db.statement() as conn:
            queue = catalog.get(conn, name)
            if not (queue.fifo or queue.dead_letter_queue is not None):
                # The common case: one claim statement, atomic without an explicit transaction.
                messages = self._claim(conn, queue, limit, visibility_timeout, None, wait_time)
                if messages:
                    return messages, queue
                # Nothing came: re-check the cached row (the queue may be gone, or have
                # a wait time or redrive policy now) before answering.
                fresh = catalog.get(conn, name, fresh=True)
                if fresh == queue:
                    return messages, queue
        with db.write() as conn:
            queue = catalog.get(conn, name, fresh=True)
            return self._claim(conn, queue, limit, visibility_timeout, attempt_id, wait_time), queue

    def _claim(
        self,
        conn: sqlite3.Connection,
        queue: QueueConfig,
        limit: int,
        visibility_timeout: int | None,
        attempt_id: str | None,
        wait_time: int | None,
    ) -> list[Message]:
        now = self._clock_ms()
        self._sweeper.maybe_sweep(conn, queue, now)
        target = redrive.target_of(conn, queue)
        if queue.fifo:
            timeout = queue.visibility_timeout if visibility_timeout is None else visibility_timeout
            limit = in_flight_room(conn, queue, now, limit)  # exact: this is the write transaction
            messages = (
                _claim_fifo(conn, queue, limit, now + timeout * 1000, now, attempt_id, target, self._counters)
                if limit > 0
                else []
            )
        else:
            messages = _claim_standard(conn, queue, limit, visibility_timeout, now, target, self._counters)
        if messages:
            self._counters.add(queue.name, now, RECEIVED, len(messages))
        elif in_flight_count(conn, queue, now) >= queue.in_flight_limit:
            if (queue.receive_wait_time if wait_time is None else wait_time) > 0:
                return []  # a long poll waits instead
            raise OverLimit(
                f"queue {queue.name!r} has reached its limit of {queue.in_flight_limit} messages in flight; "
                "delete or release messages (change visibility to 0) first, or long-poll"
            )
        return messages

    def _ready(self, queue: QueueConfig) -> bool:
        """A cheap read: could a claim find something now?  Saves taking the write lock."""
        now = self._clock_ms()
        params = {"queue_id": queue.id, "now": now}
        with self._db.statement() as conn:
            (ready,) = conn.execute(_READY_FIFO if queue.fifo else _READY_STANDARD, params).fetchone()
        return bool(ready)

    def _next_visible(self, queue: QueueConfig) -> int | None:
        """When the next delayed or in-flight message becomes visible (broker clock, ms)."""
        with self._db.statement() as conn:
            wake_at: int | None = conn.execute(
                _NEXT_FIFO if queue.fifo else _NEXT_STANDARD, (queue.id, self._clock_ms())
            ).fetchone()[0]
        return wake_at

    def _wait(self, version: int, deadline: float, wake_at: int | None) -> None:
        """Sleep until another connection commits, the broker clock reaches ``wake_at``, or the deadline.

        Every tick looks at the WAL file's stamp (a ``stat``), and every few ticks
        asks SQLite itself (``PRAGMA data_version``), so an idle poller costs little
        and a commit the stamp could miss still wakes it within a fraction of a second.
        A stamp that moved before the commit shows (its frames are written first)
        makes the next look come sooner instead of a whole tick later.
        """
        db = self._db
        stamp = db.wal_stamp()
        ticks = 0
        pause = limits.LONG_POLL_INTERVAL
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (wake_at is not None and self._clock_ms() >= wake_at):
                return
            time.sleep(min(pause, remaining))
            ticks += 1
            current = db.wal_stamp()
            moved = current != stamp
            if (moved or ticks % _VERSION_EVERY == 0) and db.data_version() != version:
                return
            stamp = current
            pause = limits.LONG_POLL_SETTLE if moved else limits.LONG_POLL_INTERVAL


def _claim_standard(
    conn: sqlite3.Connection,
    queue: QueueConfig,
    limit: int,
    visibility_timeout: int | None,
    now: int,
    target: QueueConfig | None,
    counters: Counters,
) -> list[Message]:
    params = {
        "queue_id": queue.id,
        "now": now,
        "limit": limit,
        "timeout": visibility_timeout,
        "cap": queue.in_flight_limit,
    }
    if target is not None:
        # A message received max_receive_count times goes to the dead-letter queue instead.
        while over := [
            row_id for row_id, count in conn.execute(_HEAD, params) if redrive.exhausted(count, queue)
        ]:
            relocation.move(conn, relocation.Kind.DEAD_LETTER, queue, target, over, now, counters)
    rows = conn.execute(_CLAIM_HEAD, params).fetchall()
    rows.sort(key=lambda row: (row[6], row[0]))  # RETURNING order is unspecified: oldest first
    return [to_message(row) for row in rows]


def _claim_fifo(
    conn: sqlite3.Connection,
    queue: QueueConfig,
    limit: int,
    visible_at: int,
    now: int,
    attempt_id: str | None,
    target: QueueConfig | None,
    counters: Counters,
) -> list[Message]:
    if attempt_id is not None:
        replayed = fifo.replay_attempt(conn, queue, attempt_id, visible_at, now)
        if replayed is not None:
            return replayed
    cutoff = expired_before(queue.retention_period, now)
    chosen, to_dead_letter, stale = fifo.choose(conn, queue, limit, now, cutoff, target is not None)
    if to_dead_letter and target is not None:
        dead = [row_id for row_id, _ in to_dead_letter]
        relocation.move(conn, relocation.Kind.DEAD_LETTER, queue, target, dead, now, counters)
    received = fifo.claim(conn, queue, chosen, visible_at, now)
    fifo.refresh_groups(conn, queue.id, stale - {group for _, group in chosen})
    if attempt_id is not None:
        fifo.record_attempt(
            conn, queue.id, attempt_id, received, [row_id for row_id, _ in chosen], visible_at, now
        )
    return received
