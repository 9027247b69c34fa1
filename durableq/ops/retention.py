"""Retention: a message whose enqueue time plus its queue's retention period has
passed is never returned again and is removed.  The rule is written here once,
for Python (:func:`expired_before`) and for SQL that reads the period itself
(:func:`unexpired_sql`); everything else uses one of the two."""

from __future__ import annotations

from .. import limits
from ..engines.base import Connection
from . import fifo, history
from .counters import EXPIRED, Counters
from .queue_rows import QueueConfig

#: At most this many expired rows go per sweep, so one call never holds the lock for long;
#: receive skips expired rows anyway, so what is left waits safely for the next sweep.
_SWEEP_BATCH = 5_000
_INTERVAL_MS = int(limits.RETENTION_SWEEP_INTERVAL * 1000)


def expired_before(retention_period: int, now: int) -> int:
    """Messages enqueued at or before this moment (epoch ms) have expired."""
    return now - retention_period * 1000


def unexpired_sql(retention_period: str, now: str = ":now", enqueued_at: str = "enqueued_at") -> str:
    """SQL true for a message row that has not expired; the arguments are SQL expressions."""
    return f"{enqueued_at} > {now} - {retention_period} * 1000"


_DELETE_EXPIRED = """
DELETE FROM durableq_messages WHERE id IN (
  SELECT id FROM durableq_messages WHERE queue_id = ? AND enqueued_at <= ? ORDER BY enqueued_at LIMIT ?)
RETURNING group_id, message_id, receive_count
"""


def sweep(conn: Connection, queue: QueueConfig, now: int, counters: Counters) -> int:
    """Remove (a batch of) the queue's expired messages; returns how many went."""
    cutoff = expired_before(queue.retention_period, now)
    rows = conn.execute(_DELETE_EXPIRED, (queue.id, cutoff, _SWEEP_BATCH)).fetchall()
    groups = [g for g, _, _ in rows]
    history.record(conn, queue, now, history.EXPIRED, [(message_id, count) for _, message_id, count in rows])
    if queue.fifo:
        fifo.refresh_groups(conn, queue.id, (g for g in groups if g is not None))
        fifo.forget_expired(conn, queue.id, now)
    if groups:
        counters.add(queue.name, now, EXPIRED, len(groups))
    return len(groups)


class Sweeper:
    """Sweeps each queue (its expired messages and its old history) at most once per interval of the
    broker clock (per broker)."""

    def __init__(self, counters: Counters) -> None:
        self._counters = counters
        self._last: dict[int, int] = {}

    def maybe_sweep(self, conn: Connection, queue: QueueConfig, now: int) -> None:
        last = self._last.get(queue.id)
        if last is not None and 0 <= now - last < _INTERVAL_MS:
            return
        done = sweep(conn, queue, now, self._counters) < _SWEEP_BATCH
        if history.sweep(conn, queue, now, _SWEEP_BATCH) < _SWEEP_BATCH and done:
            self._last[queue.id] = now
