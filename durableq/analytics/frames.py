"""The queue tables as Spark DataFrames, read from a snapshot through JDBC.

The SQLite JDBC driver types a column by its declared type: ``INTEGER``
becomes a 32-bit int (row ids and counts would wrap after 2^31), ``BIGINT``
a decimal, and an expression (no declared type) a decimal even when it is
text.  Every read therefore states its Spark types (``customSchema``), so
epoch milliseconds arrive as 64-bit longs, then become timestamps here.

Time windows are applied to those raw epoch-millisecond columns, before any
conversion, so Spark hands them to SQLite (``PushedFilters``): rows outside
the window never leave the file.
"""

from __future__ import annotations

import itertools
import re

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import types
from ..engines.dialect import Dialect
from ..ops.retention import unexpired_sql
from ..ops.states import STATE_SQL
from .errors import JdbcDriverNotFound
from .snapshot import Snapshot
from .window import TimeWindow

#: The states of ``messages().state``: the values :data:`durableq.ops.states.STATE_SQL` yields.
STATES = tuple(state.name for state in types.MESSAGE_STATES)

# The library's one classification, with the snapshot time for its :now parameter.
_NOW = re.compile(r":now\b")
# Unexpired: the retention rule Queue.stats() counts by, with the snapshot time for now.
_UNEXPIRED = unexpired_sql("q.retention_period", now="{now}", enqueued_at="m.enqueued_at")

_MESSAGES_SQL = """(SELECT m.id AS row_id, q.name AS queue, m.message_id, m.state, m.enqueued_at,
  m.visible_at, m.first_received_at, m.receive_count, m.body_bytes, m.group_id,
  m.deduplication_id, m.sequence, m.dead_letter_source, m.payload_bytes, m.stored_outside, m.encrypted
FROM (SELECT id, queue_id, message_id, {state} AS state, enqueued_at, visible_at, first_received_at,
        receive_count, {body_bytes} AS body_bytes, group_id, deduplication_id,
        sequence, dead_letter_source, payload_size AS payload_bytes,
        payload_ref IS NOT NULL AS stored_outside, data_key_id IS NOT NULL AS encrypted
      FROM durableq_messages) AS m
JOIN durableq_queues AS q ON q.id = m.queue_id
WHERE {unexpired}) AS durableq_messages"""
_MESSAGES_TYPES = """row_id BIGINT, queue STRING, message_id STRING, state STRING, enqueued_at BIGINT,
  visible_at BIGINT, first_received_at BIGINT, receive_count BIGINT, body_bytes BIGINT, group_id STRING,
  deduplication_id STRING, sequence BIGINT, dead_letter_source STRING, payload_bytes BIGINT,
  stored_outside BOOLEAN, encrypted BOOLEAN"""

# The row ids that split the rows a read will return into equal parts: SQLite numbers them in id
# order and gives the first id of each part, so skewed ids (a few old ones, many new) still split evenly.
_SPLITS_SQL = """SELECT min(row_id) FROM (
  SELECT row_id, ntile(:parts) OVER (ORDER BY row_id) AS part FROM {messages} WHERE {where}) AS parts
GROUP BY part ORDER BY 1"""

_QUEUES_SQL = """(SELECT name AS queue, fifo, visibility_timeout, delay_seconds, retention_period,
  receive_wait_time, maximum_message_size, content_based_deduplication, deduplication_scope,
  dead_letter_queue, max_receive_count, redrive_permission, created_at, last_modified
FROM durableq_queues) AS durableq_queues"""
_QUEUES_TYPES = """queue STRING, fifo BOOLEAN, visibility_timeout BIGINT, delay_seconds BIGINT,
  retention_period BIGINT, receive_wait_time BIGINT, maximum_message_size BIGINT,
  content_based_deduplication BOOLEAN, deduplication_scope STRING, dead_letter_queue STRING,
  max_receive_count BIGINT, redrive_permission STRING, created_at BIGINT, last_modified BIGINT"""

#: The counter columns of ``metrics()``: the fields of ``MinuteMetrics``, which declares them.
COUNTERS = tuple(types.COUNTERS)

_METRICS_SQL = f"""(SELECT q.name AS queue, c.minute, {", ".join(f"c.{c}" for c in COUNTERS)}
FROM durableq_queue_metrics AS c JOIN durableq_queues AS q ON q.id = c.queue_id) AS durableq_metrics"""
_METRICS_TYPES = "queue STRING, minute BIGINT, " + ", ".join(f"{c} BIGINT" for c in COUNTERS)

# Unexpired messages per queue (the whole snapshot, whatever the window): where the depth walks back from.
_DEPTH_SQL = "(SELECT queue, count(*) AS depth FROM {messages} GROUP BY queue) AS durableq_depth"
_DEPTH_TYPES = "queue STRING, depth BIGINT"

# Expired messages no sweep has removed yet, by the minute they expired in: they left the depth then,
# but the counters will count them only when a sweep removes them.
_UNSWEPT_SQL = """(SELECT q.name AS queue,
  ((m.enqueued_at + q.retention_period * 1000) / 60000) * 60000 AS minute, count(*) AS expired_unswept
FROM durableq_messages AS m JOIN durableq_queues AS q ON q.id = m.queue_id
WHERE NOT ({unexpired})
GROUP BY q.name, ((m.enqueued_at + q.retention_period * 1000) / 60000) * 60000) AS durableq_unswept"""
_UNSWEPT_TYPES = "queue STRING, minute BIGINT, expired_unswept BIGINT"


def messages_query(dialect: Dialect, now_ms: int) -> str:
    """The JDBC query of the unexpired messages at ``now_ms``, classified by the library's SQL (in
    ``dialect``, the snapshot's engine's)."""
    if not _NOW.search(STATE_SQL):
        raise RuntimeError("durableq.ops.states.STATE_SQL no longer uses the :now parameter")
    now = str(int(now_ms))
    return _MESSAGES_SQL.format(
        state=_NOW.sub(now, STATE_SQL),
        unexpired=_UNEXPIRED.format(now=now),
        body_bytes=dialect.byte_length("body"),
    )


def _timestamp(column: str, alias: str | None = None) -> Column:
    return F.timestamp_millis(F.col(column)).alias(alias or column)


def _window_sql(column: str, low: int | None, high: int | None) -> list[str]:
    return [
        *([] if low is None else [f"{column} >= {int(low)}"]),
        *([] if high is None else [f"{column} < {int(high)}"]),
    ]


def _window_filter(frame: DataFrame, column: str, low: int | None, high: int | None) -> DataFrame:
    # On the raw BIGINT column, so Spark pushes it to SQLite (a filter on the timestamp would not be).
    if low is not None:
        frame = frame.where(F.col(column) >= F.lit(int(low)))
    if high is not None:
        frame = frame.where(F.col(column) < F.lit(int(high)))
    return frame


def partition_predicates(snapshot: Snapshot, partitions: int, window: TimeWindow) -> list[str]:
    """WHERE clauses that split the messages a read returns into ``partitions`` parts of equal size.

    The parts are ranges of row ids cut at quantiles of the rows that pass the
    same filters as the read (unexpired, in the window), so they stay even
    however the ids are spread.  Fewer parts when there are fewer rows; one
    (everything) for an empty read.
    """
    where = _window_sql("enqueued_at", window.since_ms, window.until_ms) or ["1 = 1"]
    query = _SPLITS_SQL.format(
        messages=messages_query(snapshot.dialect, snapshot.now_ms), where=" AND ".join(where)
    )
    splits = [low for (low,) in snapshot.query(query, {"parts": max(1, partitions)})][1:]
    if not splits:
        return ["1 = 1"]
    bounds = [None, *splits, None]
    return [" AND ".join(_window_sql("row_id", low, high)) for low, high in itertools.pairwise(bounds)]


def read_messages(spark: SparkSession, snapshot: Snapshot, partitions: int, window: TimeWindow) -> DataFrame:
    """Unexpired messages sent in ``window``, read in up to ``partitions`` even parts of the snapshot."""
    predicates = partition_predicates(snapshot, partitions, window)
    raw = _read(
        spark, snapshot, messages_query(snapshot.dialect, snapshot.now_ms), _MESSAGES_TYPES, predicates
    )
    raw = _window_filter(raw, "enqueued_at", window.since_ms, window.until_ms)
    return raw.select(
        "row_id",
        "queue",
        "message_id",
        "state",
        _timestamp("enqueued_at", "sent_at"),
        _timestamp("visible_at"),
        _timestamp("first_received_at"),
        "receive_count",
        "body_bytes",
        "group_id",
        "deduplication_id",
        "sequence",
        "dead_letter_source",
        "payload_bytes",
        "stored_outside",
        "encrypted",
        # Age at the snapshot time, in seconds.
        ((F.lit(snapshot.now_ms) - F.col("enqueued_at")) / 1000.0).alias("age_seconds"),
    )


def read_queues(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """One row per queue: its settings, as ``Queue.attributes()`` knows them."""
    raw = _read(spark, snapshot, _QUEUES_SQL, _QUEUES_TYPES)
    timestamps = ("created_at", "last_modified")
    return raw.select(*(_timestamp(c) if c in timestamps else F.col(c) for c in raw.columns))


def read_metrics(
    spark: SparkSession, snapshot: Snapshot, since_ms: int | None = None, until_ms: int | None = None
) -> DataFrame:
    """The per-minute counters (``minute`` is the minute's start) of the minutes in ``[since, until)``.

    A minute counts when it overlaps the window; none after the snapshot time.
    """
    raw = _read(spark, snapshot, _METRICS_SQL, _METRICS_TYPES)
    first = None if since_ms is None else since_ms - since_ms % 60_000
    last = snapshot.now_ms + 1 if until_ms is None else min(until_ms, snapshot.now_ms + 1)
    raw = _window_filter(raw, "minute", first, last)
    return raw.select("queue", _timestamp("minute"), *COUNTERS)


def read_depth(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """Unexpired messages per queue at the snapshot time (queues with none are absent), counted by SQLite."""
    return _read(
        spark,
        snapshot,
        _DEPTH_SQL.format(messages=messages_query(snapshot.dialect, snapshot.now_ms)),
        _DEPTH_TYPES,
    )


def read_unswept(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """Expired messages still in the file, per queue and the minute they expired in."""
    unexpired = _UNEXPIRED.format(now=int(snapshot.now_ms))
    raw = _read(spark, snapshot, _UNSWEPT_SQL.format(unexpired=unexpired), _UNSWEPT_TYPES)
    return raw.select("queue", _timestamp("minute"), "expired_unswept")


def _read(
    spark: SparkSession,
    snapshot: Snapshot,
    table: str,
    types: str,
    predicates: list[str] | None = None,
) -> DataFrame:
    url, table, properties = snapshot.jdbc(table)
    properties["customSchema"] = " ".join(types.split())
    try:
        if predicates is not None and len(predicates) > 1:
            # One partition per predicate: Spark adds each to the WHERE of its query.
            return spark.read.jdbc(url, table, predicates=predicates, properties=properties)
        return (
            spark.read.format("jdbc").option("url", url).option("dbtable", table).options(**properties).load()
        )
    except Exception as exc:  # py4j wraps the JVM's error; only this one gets a better message
        driver = snapshot.driver_class
        if driver in str(exc) and "ClassNotFound" in str(exc):
            raise JdbcDriverNotFound(
                f"the Spark session cannot load the JDBC driver {driver}; start it with spark.jars naming "
                "the driver jar (spark-submit --jars), run `ADD JAR` with it, or let durableq start the "
                "session (jdbc_jar=...)"
            ) from exc
        raise
