"""The queue tables as Spark DataFrames, read from a snapshot through JDBC.

The SQLite JDBC driver types a column by its declared type: ``INTEGER``
becomes a 32-bit int (row ids and counts would wrap after 2^31), ``BIGINT``
a decimal, and an expression (no declared type) a decimal even when it is
text.  Every read therefore states its Spark types (``customSchema``), so
epoch milliseconds arrive as 64-bit longs, then become timestamps here.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..ops.retention import unexpired_sql
from ..ops.states import STATE_SQL
from .driver import DRIVER_CLASS, jdbc_url
from .errors import JdbcDriverNotFound
from .snapshot import Snapshot

#: The states of ``messages().state``: the values :data:`durableq.ops.states.STATE_SQL` yields.
STATES = ("delayed", "visible", "in_flight")

# The library's one classification, with the snapshot time for its :now parameter.
_NOW = re.compile(r":now\b")
# Unexpired: the retention rule Queue.stats() counts by, with the snapshot time for now.
_UNEXPIRED = unexpired_sql("q.retention_period", now="{now}", enqueued_at="m.enqueued_at")

_MESSAGES_SQL = """(SELECT m.id AS row_id, q.name AS queue, m.message_id, m.state, m.enqueued_at,
  m.visible_at, m.first_received_at, m.receive_count, m.body_bytes, m.group_id,
  m.deduplication_id, m.sequence, m.dead_letter_source
FROM (SELECT id, queue_id, message_id, {state} AS state, enqueued_at, visible_at, first_received_at,
        receive_count, length(CAST(body AS BLOB)) AS body_bytes, group_id, deduplication_id,
        sequence, dead_letter_source
      FROM messages) AS m
JOIN queues AS q ON q.id = m.queue_id
WHERE {unexpired}) AS durableq_messages"""
_MESSAGES_TYPES = """row_id BIGINT, queue STRING, message_id STRING, state STRING, enqueued_at BIGINT,
  visible_at BIGINT, first_received_at BIGINT, receive_count BIGINT, body_bytes BIGINT, group_id STRING,
  deduplication_id STRING, sequence BIGINT, dead_letter_source STRING"""

_QUEUES_SQL = """(SELECT name AS queue, fifo, visibility_timeout, delay_seconds, retention_period,
  receive_wait_time, maximum_message_size, content_based_deduplication, deduplication_scope,
  dead_letter_queue, max_receive_count, redrive_permission, created_at, last_modified
FROM queues) AS durableq_queues"""
_QUEUES_TYPES = """queue STRING, fifo BOOLEAN, visibility_timeout BIGINT, delay_seconds BIGINT,
  retention_period BIGINT, receive_wait_time BIGINT, maximum_message_size BIGINT,
  content_based_deduplication BOOLEAN, deduplication_scope STRING, dead_letter_queue STRING,
  max_receive_count BIGINT, redrive_permission STRING, created_at BIGINT, last_modified BIGINT"""

_METRICS_SQL = """(SELECT q.name AS queue, c.minute, c.sent, c.received, c.deleted,
  c.moved_to_dead_letter, c.expired, c.empty_receives
FROM queue_metrics AS c JOIN queues AS q ON q.id = c.queue_id) AS durableq_metrics"""
_METRICS_TYPES = """queue STRING, minute BIGINT, sent BIGINT, received BIGINT, deleted BIGINT,
  moved_to_dead_letter BIGINT, expired BIGINT, empty_receives BIGINT"""

#: The counter columns of ``metrics()``, in table order.
COUNTERS = ("sent", "received", "deleted", "moved_to_dead_letter", "expired", "empty_receives")


def messages_query(now_ms: int) -> str:
    """The JDBC query of the unexpired messages at ``now_ms``, classified by the library's SQL."""
    if not _NOW.search(STATE_SQL):
        raise RuntimeError("durableq.ops.states.STATE_SQL no longer uses the :now parameter")
    now = str(int(now_ms))
    return _MESSAGES_SQL.format(state=_NOW.sub(now, STATE_SQL), unexpired=_UNEXPIRED.format(now=now))


def _timestamp(column: str, alias: str | None = None) -> Column:
    return F.timestamp_millis(F.col(column)).alias(alias or column)


def read_messages(spark: SparkSession, snapshot: Snapshot, partitions: int) -> DataFrame:
    """Unexpired messages, read in up to ``partitions`` row-id ranges of the snapshot."""
    ids = snapshot.id_range
    partitions = max(1, min(partitions, ids.high - ids.low + 1))
    options: dict[str, str] = {}
    if partitions > 1:
        options = {
            "partitionColumn": "row_id",
            "lowerBound": str(ids.low),
            # Spark's strides cover [lowerBound, upperBound); the last one is open-ended anyway.
            "upperBound": str(ids.high + 1),
            "numPartitions": str(partitions),
        }
    raw = _read(spark, snapshot, messages_query(snapshot.now_ms), _MESSAGES_TYPES, options)
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
        # Age at the snapshot time, in seconds.
        ((F.lit(snapshot.now_ms) - F.col("enqueued_at")) / 1000.0).alias("age_seconds"),
    )


def read_queues(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """One row per queue: its settings, as ``Queue.attributes()`` knows them."""
    raw = _read(spark, snapshot, _QUEUES_SQL, _QUEUES_TYPES)
    timestamps = ("created_at", "last_modified")
    return raw.select(*(_timestamp(c) if c in timestamps else F.col(c) for c in raw.columns))


def read_metrics(spark: SparkSession, snapshot: Snapshot) -> DataFrame:
    """The per-minute counters (``minute`` is the minute's start)."""
    raw = _read(spark, snapshot, _METRICS_SQL, _METRICS_TYPES)
    return raw.select("queue", _timestamp("minute"), *COUNTERS)


def _read(
    spark: SparkSession,
    snapshot: Snapshot,
    table: str,
    types: str,
    partitioning: dict[str, str] | None = None,
) -> DataFrame:
    reader = (
        spark.read.format("jdbc")
        .option("url", jdbc_url(snapshot.path))
        .option("driver", DRIVER_CLASS)
        .option("dbtable", table)
        .option("customSchema", " ".join(types.split()))
        .option("open_mode", "1")  # SQLITE_OPEN_READONLY: the snapshot is never written
        .options(**(partitioning or {}))
    )
    try:
        return reader.load()
    except Exception as exc:  # py4j wraps the JVM's error; only this one gets a better message
        if DRIVER_CLASS in str(exc) and "ClassNotFound" in str(exc):
            raise JdbcDriverNotFound(
                f"the Spark session cannot load the SQLite JDBC driver ({DRIVER_CLASS}); start it with "
                "spark.jars naming the driver jar, or let durableq start the session (jdbc_jar=...)"
            ) from exc
        raise
