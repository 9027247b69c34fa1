"""The message history and the audit trail as Spark DataFrames, read from a snapshot through JDBC.

``message_events`` (queues with ``history`` on) and ``audit_events`` (always
on) are read like the other tables: every column's Spark type is stated
(``customSchema``), epoch milliseconds arrive as 64-bit longs and become
timestamps, and the time window and event-id range are filters on the raw
columns, so Spark hands them to SQLite (``PushedFilters``).  The reads are
split at quantiles of the event ids, into parts of equal size.
"""

from __future__ import annotations

import itertools

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType, TimestampType

from .frames import _read, _window_filter, _window_sql
from .snapshot import Snapshot
from .window import TimeWindow


def _field(name: str, kind: DataType, comment: str) -> StructField:
    # The comment is the field's metadata (Spark's column comment), so the schema documents itself.
    return StructField(name, kind, True, {"comment": comment})


#: The columns of :meth:`QueueAnalytics.events`: one row per event of a queue that keeps history.
EVENTS_SCHEMA = StructType(
    [
        _field("event_id", LongType(), "only grows, never reused: a checkpoint"),
        _field("at", TimestampType(), "the broker's clock, exact to the millisecond (UTC)"),
        _field("queue", StringType(), "the queue's name"),
        _field(
            "event",
            StringType(),
            "sent, received, visibility_changed, deleted, moved_to_dead_letter, "
            "moved_out, moved_in, expired or purged",
        ),
        _field("message_id", StringType(), "the message's id"),
        _field("receive_count", LongType(), "the message's receive count after the event"),
        _field("other_queue", StringType(), "a move's other end (where it went, or came from); else null"),
        _field(
            "visible_at",
            TimestampType(),
            "when the message becomes visible after the event: of sent (the delay apart) and "
            "visibility_changed; else null",
        ),
    ]
)
#: The columns of :meth:`QueueAnalytics.audit`: one row per management call (the audit trail).
AUDIT_SCHEMA = StructType(
    [
        _field("event_id", LongType(), "only grows: a checkpoint"),
        _field("at", TimestampType(), "the broker's clock, exact to the millisecond (UTC)"),
        _field("pid", LongType(), "the process that made the call"),
        _field("user", StringType(), "its OS user"),
        _field("action", StringType(), "SQS's name of the call: CreateQueue, PurgeQueue, ..."),
        _field("queue", StringType(), "the queue it was about; null for calls about no one queue"),
        _field("outcome", StringType(), "OK, or the code of the error the call raised"),
        _field("detail", StringType(), "a JSON object: what the call changed"),
    ]
)

#: The format name of the Structured Streaming source over the events (``stream.py``).
EVENT_STREAM_FORMAT = "durableq-events"

# Events of queues that exist (a deleted queue's events go with it; its placeholder row, of queue 0,
# joins no queue).
_EVENTS_SQL = """(SELECT e.event_id, e.at, q.name AS queue, e.event, e.message_id, e.receive_count,
  e.other_queue, e.visible_at
FROM durableq_message_events AS e JOIN durableq_queues AS q ON q.id = e.queue_id) AS durableq_events"""
_EVENTS_TYPES = """event_id BIGINT, at BIGINT, queue STRING, event STRING, message_id STRING,
  receive_count BIGINT, other_queue STRING, visible_at BIGINT"""
_AUDIT_SQL = """(SELECT id AS event_id, at, pid, "user", action, queue, outcome, detail
FROM durableq_audit_events) AS durableq_audit"""
_AUDIT_TYPES = """event_id BIGINT, at BIGINT, pid BIGINT, user STRING, action STRING, queue STRING,
  outcome STRING, detail STRING"""

# The event ids that split the rows a read returns into equal parts (as the messages' row ids).
_SPLITS_SQL = """SELECT min(event_id) FROM (
  SELECT event_id, ntile(:parts) OVER (ORDER BY event_id) AS part FROM {query} WHERE {where}) AS parts
GROUP BY part ORDER BY 1"""
_MAX_SQL = "SELECT coalesce(max({column}), 0) FROM {table}"

#: The stored tables, their id column, the JDBC query and its types, and the frame's schema.
_TABLES = {
    "events": ("durableq_message_events", "event_id", _EVENTS_SQL, _EVENTS_TYPES, EVENTS_SCHEMA),
    "audit": ("durableq_audit_events", "id", _AUDIT_SQL, _AUDIT_TYPES, AUDIT_SCHEMA),
}
# Columns stored as epoch milliseconds, read as timestamps.
_TIMES = ("at", "visible_at")
#: The event tables ``read_event_table`` knows.
EVENT_TABLES = tuple(_TABLES)


def last_event_id(snapshot: Snapshot, table: str) -> int:
    """The highest id of ``table`` (``events`` or ``audit``) in the snapshot; 0 when it is empty.

    Ids only grow and the newest row is never deleted, so every later event has a higher id; and
    the snapshot is settled (a copy of a file; on PostgreSQL begun as ``settled_read`` begins), so
    no event at or below this id is still to commit: an export resumes after it and misses none.
    """
    stored, column, *_ = _TABLES[table]
    [(highest,)] = snapshot.query(_MAX_SQL.format(column=column, table=stored))
    return int(highest)


def read_event_table(
    spark: SparkSession,
    snapshot: Snapshot,
    table: str,
    window: TimeWindow,
    *,
    partitions: int = 1,
    after: int | None = None,
    upto: int | None = None,
) -> DataFrame:
    """``table`` (``events`` or ``audit``): rows with ``at`` in ``window`` and ``after < event_id <= upto``.

    Nothing is cached: filters added later still reach SQLite.
    """
    _, _, query, types, schema = _TABLES[table]
    where = [
        *_window_sql("at", window.since_ms, window.until_ms),
        *([] if after is None else [f"event_id > {int(after)}"]),
        *([] if upto is None else [f"event_id <= {int(upto)}"]),
    ]
    splits_sql = _SPLITS_SQL.format(query=query, where=" AND ".join(where) or "1 = 1")
    splits = [low for (low,) in snapshot.query(splits_sql, {"parts": max(1, partitions)})][1:]
    bounds = [None, *splits, None]
    predicates = [
        " AND ".join(_window_sql("event_id", low, high)) for low, high in itertools.pairwise(bounds)
    ]
    raw = _read(spark, snapshot, query, types, predicates if len(predicates) > 1 else None)
    raw = _window_filter(raw, "at", window.since_ms, window.until_ms)
    if after is not None:
        raw = raw.where(F.col("event_id") > F.lit(int(after)))
    if upto is not None:
        raw = raw.where(F.col("event_id") <= F.lit(int(upto)))
    # Each column gets the schema's metadata in place of the JDBC source's (metadata takes part in
    # StructType equality); a plain alias, so filters on the columns still reach SQLite.
    return raw.select(
        *(
            (F.timestamp_millis(F.col(f.name)) if f.name in _TIMES else F.col(f.name)).alias(
                f.name, metadata=f.metadata
            )
            for f in schema.fields
        )
    )
