"""Queue depth by state, the in-flight limit, and reading the per-minute counters."""

from __future__ import annotations

import sqlite3
import time

from ..types import MinuteMetrics, QueueStats, datetime_from_ms
from .counters import MINUTE_MS
from .queue_rows import QueueConfig
from .retention import expired_before

#: A message's state at time ``:now``, as SQL over a ``messages`` row; stats and the
#: Spark reader both classify with it.  Delayed: never received and not yet visible.
STATE_SQL = """CASE
  WHEN visible_at <= :now THEN 'visible'
  WHEN receive_count > 0 THEN 'in_flight'
  ELSE 'delayed' END"""

# One pass over the queue's range of ix_messages_visible, which holds every
# column this needs: SQLite reads index pages only, never a message row.
_DEPTH = f"""
SELECT {STATE_SQL} AS state, count(*)
FROM messages INDEXED BY ix_messages_visible
WHERE queue_id = :queue_id AND enqueued_at > :expired_before
GROUP BY state
"""
_OLDEST = "SELECT min(enqueued_at) FROM messages WHERE queue_id = ? AND enqueued_at > ?"
# In flight = invisible and received: a range of the same index.
_IN_FLIGHT = """
SELECT count(*) FROM (
  SELECT 1 FROM messages WHERE queue_id = ? AND visible_at > ? AND receive_count > 0 LIMIT ?)
"""
_METRICS = """
SELECT minute, sent, received, deleted, moved_to_dead_letter, expired, empty_receives
FROM queue_metrics WHERE queue_id = ? AND minute >= ? ORDER BY minute
"""


def queue_stats(conn: sqlite3.Connection, queue: QueueConfig, now: int) -> QueueStats:
    cutoff = expired_before(queue.retention_period, now)
    depth = dict(conn.execute(_DEPTH, {"now": now, "queue_id": queue.id, "expired_before": cutoff}))
    (oldest,) = conn.execute(_OLDEST, (queue.id, cutoff)).fetchone()
    return QueueStats(
        approximate_number_of_messages=depth.get("visible", 0),
        approximate_number_of_messages_not_visible=depth.get("in_flight", 0),
        approximate_number_of_messages_delayed=depth.get("delayed", 0),
        oldest_message_age=0 if oldest is None else max((now - oldest) // 1000, 0),
    )


class InFlightGauge:
    """Knows, cheaply, whether a queue may put more messages in flight.

    Counting in-flight messages reads a range of an index, so a broker counts
    each queue at most once per interval and, between counts, adds what it
    received itself.  Near the limit (within ``margin``) it counts on every
    receive, so the limit holds exactly where it matters.
    """

    def __init__(self, interval: float = 1.0, margin: int = 1_000) -> None:
        self._interval = interval
        self._margin = margin
        self._known: dict[int, tuple[float, int]] = {}  # queue id -> (counted at, count)

    def room(self, conn: sqlite3.Connection, queue: QueueConfig, now: int) -> int:
        """How many more messages may go in flight (a lower bound far from the limit)."""
        limit = queue.in_flight_limit
        known = self._known.get(queue.id)
        if known is not None:
            counted_at, known_count = known
            if time.monotonic() - counted_at < self._interval and known_count < limit - self._margin:
                return limit - self._margin - known_count
        count: int = conn.execute(_IN_FLIGHT, (queue.id, now, limit)).fetchone()[0]
        self._known[queue.id] = (time.monotonic(), count)
        return limit - count

    def received(self, queue_id: int, count: int) -> None:
        known = self._known.get(queue_id)
        if known is not None:
            self._known[queue_id] = (known[0], known[1] + count)


def minute_metrics(conn: sqlite3.Connection, queue: QueueConfig, since: int) -> list[MinuteMetrics]:
    rows = conn.execute(_METRICS, (queue.id, since - since % MINUTE_MS))
    return [MinuteMetrics(datetime_from_ms(minute), *counts) for minute, *counts in rows]
