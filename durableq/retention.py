"""Retention: messages older than their queue's retention period are removed."""

from __future__ import annotations

import sqlite3

from . import fifo, limits
from .counters import EXPIRED, Counters
from .queues import QueueConfig

#: At most this many expired rows go per sweep, so one call never holds the lock for long;
#: receive skips expired rows anyway, so what is left waits safely for the next sweep.
_SWEEP_BATCH = 5_000
_INTERVAL_MS = int(limits.RETENTION_SWEEP_INTERVAL * 1000)

_DELETE_EXPIRED = """
DELETE FROM messages WHERE id IN (
  SELECT id FROM messages WHERE queue_id = ? AND enqueued_at <= ? ORDER BY enqueued_at LIMIT ?)
RETURNING group_id
"""


def sweep(conn: sqlite3.Connection, queue: QueueConfig, now: int, counters: Counters) -> int:
    """Remove (a batch of) the queue's expired messages; returns how many went."""
    expired_before = now - queue.retention_period * 1000
    groups = [g for (g,) in conn.execute(_DELETE_EXPIRED, (queue.id, expired_before, _SWEEP_BATCH))]
    if queue.fifo:
        fifo.refresh_groups(conn, queue.id, (g for g in groups if g is not None))
        fifo.forget_expired(conn, queue.id, now)
    if groups:
        counters.add(queue.name, now, EXPIRED, len(groups))
    return len(groups)


class Sweeper:
    """Sweeps each queue at most once per interval of the broker clock (per broker)."""

    def __init__(self, counters: Counters) -> None:
        self._counters = counters
        self._last: dict[int, int] = {}

    def maybe_sweep(self, conn: sqlite3.Connection, queue: QueueConfig, now: int) -> None:
        last = self._last.get(queue.id)
        if last is not None and 0 <= now - last < _INTERVAL_MS:
            return
        if sweep(conn, queue, now, self._counters) < _SWEEP_BATCH:
            self._last[queue.id] = now
