"""Queue depth by state, the in-flight limit, and reading the per-minute counters."""

from __future__ import annotations

from ..engines.base import Connection
from ..engines.dialect import Dialect, for_each_dialect
from ..types import MESSAGE_STATES, MinuteMetrics, QueueStats, datetime_from_ms
from .counters import COLUMNS as COUNTER_COLUMNS
from .counters import MINUTE_MS
from .queue_rows import QueueConfig
from .retention import expired_before
from .states import STATE_SQL, in_flight_sql


# One pass over the queue's range of durableq_ix_messages_visible, which holds every
# column this needs: SQLite reads index pages only, never a message row.
def _depth(d: Dialect) -> str:
    return f"""
SELECT {STATE_SQL} AS state, count(*)
FROM durableq_messages {d.indexed_by("durableq_ix_messages_visible")}
WHERE queue_id = :queue_id AND enqueued_at > :expired_before
GROUP BY state
"""


_DEPTH = for_each_dialect(_depth)
_OLDEST = "SELECT min(enqueued_at) FROM durableq_messages WHERE queue_id = ? AND enqueued_at > ?"
# In flight at :now, counted from a range of the same index, up to :cap (the queue's limit).
_IN_FLIGHT_ROWS = f"""(
  SELECT 1 FROM durableq_messages
  WHERE queue_id = :queue_id AND {in_flight_sql()} LIMIT :cap) AS in_flight"""
_IN_FLIGHT_COUNT = f"(SELECT count(*) FROM {_IN_FLIGHT_ROWS})"
#: SQL for how many more messages of ``:queue_id`` may go in flight now, at most ``:limit``.  It is a
#: claim's LIMIT, so the in-flight limit holds inside the claim, whoever else receives at the same
#: time.  Counting reads about 0.1 ms of index per 1,000 messages in flight, so it is skipped when a
#: bound costing two index lookups proves there is room: no queue holds more messages than the span
#: of row ids in the table.  The count is the aggregate of ``counted`` (not a sub-select of it, which
#: PostgreSQL pulls up into each of the three mentions of ``n``: three sub-plans started at every claim).
IN_FLIGHT_ROOM_SQL = f"""(SELECT CASE
  WHEN (SELECT max(id) FROM durableq_messages) - (SELECT min(id) FROM durableq_messages) + :limit < :cap
  THEN :limit
  ELSE (SELECT CASE WHEN n >= :cap THEN 0 WHEN :cap - n < :limit THEN :cap - n ELSE :limit END
        FROM (SELECT count(*) AS n FROM {_IN_FLIGHT_ROWS}) AS counted)
  END)"""
_METRICS = f"""
SELECT minute, {", ".join(COUNTER_COLUMNS)}
FROM durableq_queue_metrics WHERE queue_id = ? AND minute >= ? ORDER BY minute
"""


def queue_stats(conn: Connection, queue: QueueConfig, now: int) -> QueueStats:
    cutoff = expired_before(queue.retention_period, now)
    depth = dict(
        conn.execute(_DEPTH[conn.dialect], {"now": now, "queue_id": queue.id, "expired_before": cutoff})
    )
    (oldest,) = conn.execute(_OLDEST, (queue.id, cutoff)).fetchone()
    return QueueStats(
        **{state.count: depth.get(state.name, 0) for state in MESSAGE_STATES},
        oldest_message_age=0 if oldest is None else max((now - oldest) // 1000, 0),
    )


def in_flight_room(conn: Connection, queue: QueueConfig, now: int, limit: int) -> int:
    """How many more messages (at most ``limit``) may go in flight now; exact inside a write."""
    params = {"queue_id": queue.id, "now": now, "cap": queue.in_flight_limit, "limit": limit}
    room: int = conn.execute(f"SELECT {IN_FLIGHT_ROOM_SQL}", params).fetchone()[0]
    return room


def in_flight_count(conn: Connection, queue: QueueConfig, now: int) -> int:
    """How many messages of ``queue`` are in flight, counted up to its limit (no further)."""
    params = {"queue_id": queue.id, "now": now, "cap": queue.in_flight_limit}
    count: int = conn.execute(f"SELECT {_IN_FLIGHT_COUNT}", params).fetchone()[0]
    return count


def minute_metrics(conn: Connection, queue: QueueConfig, since: int) -> list[MinuteMetrics]:
    rows = conn.execute(_METRICS, (queue.id, since - since % MINUTE_MS))
    return [MinuteMetrics(datetime_from_ms(minute), *counts) for minute, *counts in rows]
