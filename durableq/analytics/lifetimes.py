"""The reports over message history: how long messages live, how long workers hold them, how often
they are retried.

Each reads :meth:`QueueAnalytics.events` (limited to the time window), so a
queue without history has no events and no row.  A message counts in a queue's
row when the events the report needs are all in that queue's data: a message
sent before the window, or before its queue's history was on, has no ``sent``
event and is left out of ``latency``.  Times are seconds (double, exact to the
millisecond); the percentiles are Spark's ``percentile_approx`` with
:data:`ACCURACY`, as in the age report.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..ops import history

#: Percentiles of these reports and of the age report, and the accuracy of Spark's
#: percentile_approx: the rank of each answer is within (values / ACCURACY) of the exact one,
#: and the sketch stays small.
PERCENTILES = (0.5, 0.9, 0.99)
ACCURACY = 10_000


def percentile_name(fraction: float) -> str:
    """``p50`` for 0.5."""
    return f"p{round(fraction * 100)}"


def _ms(event: str) -> Column:
    """Per message: the time of its ``event`` (the last one), in epoch milliseconds."""
    return F.max(F.when(F.col("event") == F.lit(event), F.unix_millis("at")))


def _distribution(per_message: DataFrame, value: str, *counts: Column) -> DataFrame:
    """Per queue: ``messages``, the ``counts``, the percentiles of ``value`` and its ``max``."""
    summary = per_message.groupBy("queue").agg(
        F.count(F.lit(1)).alias("messages"),
        *counts,
        F.percentile_approx(value, list(PERCENTILES), ACCURACY).alias("percentiles"),
        F.max(value).alias("max"),
    )
    columns = [F.col("percentiles")[i].alias(percentile_name(p)) for i, p in enumerate(PERCENTILES)]
    names = [c for c in summary.columns if c not in ("queue", "messages", "percentiles", "max")]
    return summary.select("queue", "messages", *names, *columns, "max")


def latency(events: DataFrame) -> DataFrame:
    """Per queue, over the messages whose ``sent`` and ``deleted`` events are both in the data:
    ``messages``, and the seconds from the send to the delete: ``p50``, ``p90``, ``p99``, ``max``."""
    per_message = (
        events.where(F.col("event").isin(history.SENT, history.DELETED))
        .groupBy("queue", "message_id")
        .agg(_ms(history.SENT).alias("sent"), _ms(history.DELETED).alias("deleted"))
        .where(F.col("sent").isNotNull() & F.col("deleted").isNotNull())
        .select("queue", ((F.col("deleted") - F.col("sent")) / 1000.0).alias("seconds"))
    )
    return _distribution(per_message, "seconds")


def processing(events: DataFrame) -> DataFrame:
    """Per queue, over the deleted messages with a ``received`` event in the data: ``messages``, and the
    seconds from the last receive to the delete (how long the worker held it): percentiles, ``max``."""
    per_message = (
        events.where(F.col("event").isin(history.RECEIVED, history.DELETED))
        .groupBy("queue", "message_id")
        .agg(_ms(history.RECEIVED).alias("received"), _ms(history.DELETED).alias("deleted"))
        .where(F.col("received").isNotNull() & F.col("deleted").isNotNull())
        .select("queue", ((F.col("deleted") - F.col("received")) / 1000.0).alias("seconds"))
    )
    return _distribution(per_message, "seconds")


def retries(events: DataFrame) -> DataFrame:
    """Per queue, over the messages deleted or moved to a dead-letter queue in the data: ``messages``,
    ``deleted_first_receive`` (deleted after one receive), ``deleted_after_retries`` (after more),
    ``dead_lettered``, and the percentiles and ``max`` of how many times they had been received
    (the ``receive_count`` of that last event, as the library counts)."""
    ended = events.where(F.col("event").isin(history.DELETED, history.MOVED_TO_DEAD_LETTER)).select(
        "queue", "event", F.col("receive_count").alias("receives")
    )
    deleted = F.col("event") == F.lit(history.DELETED)

    def count(condition: Column, name: str) -> Column:
        return F.count(F.when(condition, F.lit(1))).alias(name)

    return _distribution(
        ended,
        "receives",
        count(deleted & (F.col("receives") <= 1), "deleted_first_receive"),
        count(deleted & (F.col("receives") > 1), "deleted_after_retries"),
        count(~deleted, "dead_lettered"),
    )
