"""The reports over message history: how long messages live, wait for their first receive, how long
workers hold them, how often they are retried.

Each reads :meth:`QueueAnalytics.events` (limited to the time window), so a
queue without history has no events and no row.  A message counts in a queue's
row when the events the report needs are all in that queue's data: a message
sent before the window, or before its queue's history was on, has no ``sent``
event and is left out of ``latency``.  With ``completed_since`` (the
"completed in the window" mode) the events are those before the window's end,
and a message counts when it completed in the window (its delete, dead letter
or, for ``wait``, its first receive, at or after ``completed_since``), whenever
it was sent.  Times are seconds (double, exact to the millisecond); the
percentiles are Spark's ``percentile_approx`` with :data:`ACCURACY`, as in the
age report, or with ``exact`` Spark's ``percentile`` (interpolated between the
two nearest values).  ``durableq.arrow`` computes the same reports without Spark.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .. import limits
from ..ops import history

#: Percentiles of these reports and of the age report, and the accuracy of Spark's percentile_approx.
PERCENTILES = limits.REPORT_PERCENTILES
ACCURACY = limits.PERCENTILE_ACCURACY
#: The ``measured_from`` of the wait report's two rows per queue.
FROM_SENT = "sent"
FROM_VISIBLE = "visible"


def percentile_name(fraction: float) -> str:
    """``p50`` for 0.5."""
    return f"p{round(fraction * 100)}"


def percentiles(value: str, *, exact: bool = False) -> Column:
    """The array of :data:`PERCENTILES` of ``value``: approximate, or exact and interpolated."""
    if exact:
        return F.percentile(value, list(PERCENTILES))
    return F.percentile_approx(value, list(PERCENTILES), ACCURACY)


def _ms(event: str, *, first: bool = False) -> Column:
    """Per message: the time of its ``event`` (the last one; ``first``: the first), in epoch ms."""
    at = F.when(F.col("event") == F.lit(event), F.unix_millis("at"))
    return F.min(at) if first else F.max(at)


def _distribution(per_message: DataFrame, value: str, *counts: Column, exact: bool = False) -> DataFrame:
    """Per queue: ``messages``, the ``counts``, the percentiles of ``value`` and its ``max``."""
    summary = per_message.groupBy("queue").agg(
        F.count(F.lit(1)).alias("messages"),
        *counts,
        percentiles(value, exact=exact).alias("percentiles"),
        F.max(value).alias("max"),
    )
    columns = [F.col("percentiles")[i].alias(percentile_name(p)) for i, p in enumerate(PERCENTILES)]
    names = [c for c in summary.columns if c not in ("queue", "messages", "percentiles", "max")]
    return summary.select("queue", "messages", *names, *columns, "max")


def _completed(per_message: DataFrame, column: str, since_ms: int | None) -> DataFrame:
    """In the "completed in the window" mode, the messages whose ``column`` (epoch ms) is in it."""
    return per_message if since_ms is None else per_message.where(F.col(column) >= F.lit(since_ms))


def _seconds(end: str, start: str) -> Column:
    return ((F.col(end) - F.col(start)) / 1000.0).alias("seconds")


def latency(events: DataFrame, *, exact: bool = False, completed_since: int | None = None) -> DataFrame:
    """Per queue, over the messages whose ``sent`` and ``deleted`` events are both in the data:
    ``messages``, and the seconds from the send to the delete: ``p50``, ``p90``, ``p95``, ``p99``, ``max``."""
    per_message = (
        events.where(F.col("event").isin(history.SENT, history.DELETED))
        .groupBy("queue", "message_id")
        .agg(_ms(history.SENT).alias("sent"), _ms(history.DELETED).alias("deleted"))
        .where(F.col("sent").isNotNull() & F.col("deleted").isNotNull())
    )
    per_message = _completed(per_message, "deleted", completed_since)
    return _distribution(per_message.select("queue", _seconds("deleted", "sent")), "seconds", exact=exact)


def processing(events: DataFrame, *, exact: bool = False, completed_since: int | None = None) -> DataFrame:
    """Per queue, over the deleted messages with a ``received`` event in the data: ``messages``, and the
    seconds from the last receive to the delete (how long the worker held it): percentiles, ``max``."""
    per_message = (
        events.where(F.col("event").isin(history.RECEIVED, history.DELETED))
        .groupBy("queue", "message_id")
        .agg(_ms(history.RECEIVED).alias("received"), _ms(history.DELETED).alias("deleted"))
        .where(F.col("received").isNotNull() & F.col("deleted").isNotNull())
    )
    per_message = _completed(per_message, "deleted", completed_since)
    return _distribution(per_message.select("queue", _seconds("deleted", "received")), "seconds", exact=exact)


def wait(events: DataFrame, *, exact: bool = False, completed_since: int | None = None) -> DataFrame:
    """Per queue, over the messages whose ``sent`` event and first receive are both in the data, two
    rows (``measured_from``): ``sent``, the seconds from the send to the first receive; ``visible``,
    from the moment the message became visible (after its delay: the send's ``visible_at``) to the
    first receive, the time it queued.  ``messages``, percentiles, ``max``.  Messages sent before
    events carried ``visible_at`` count in the ``sent`` row only."""
    per_message = (
        events.where(F.col("event").isin(history.SENT, history.RECEIVED))
        .groupBy("queue", "message_id")
        .agg(
            _ms(history.SENT).alias("sent"),
            F.max(F.when(F.col("event") == F.lit(history.SENT), F.unix_millis("visible_at"))).alias(
                "visible"
            ),
            _ms(history.RECEIVED, first=True).alias("received"),
        )
        .where(F.col("sent").isNotNull() & F.col("received").isNotNull())
    )
    per_message = _completed(per_message, "received", completed_since)
    waits = per_message.select(
        "queue",
        F.explode(
            F.array(
                F.struct(F.lit(FROM_SENT).alias("measured_from"), _seconds("received", "sent")),
                F.struct(F.lit(FROM_VISIBLE).alias("measured_from"), _seconds("received", "visible")),
            )
        ).alias("wait"),
    ).select("queue", "wait.measured_from", "wait.seconds")
    waits = waits.where(F.col("seconds").isNotNull())
    summary = waits.groupBy("queue", "measured_from").agg(
        F.count(F.lit(1)).alias("messages"),
        percentiles("seconds", exact=exact).alias("percentiles"),
        F.max("seconds").alias("max"),
    )
    columns = [F.col("percentiles")[i].alias(percentile_name(p)) for i, p in enumerate(PERCENTILES)]
    return summary.select("queue", "measured_from", "messages", *columns, "max")


def retries(events: DataFrame, *, exact: bool = False, completed_since: int | None = None) -> DataFrame:
    """Per queue, over the messages deleted or moved to a dead-letter queue whose arrival in the queue
    (``sent`` or ``moved_in``) is in the data: ``messages``, ``deleted_first_receive`` (deleted after
    one receive), ``deleted_after_retries`` (after more), ``dead_lettered``, and the percentiles and
    ``max`` of how many times they had been received in this queue.

    The receive count a message brings along from another queue (a dead-letter queue's messages
    arrive with the count that sent them there) is not counted: receives are the ``receive_count``
    of the last event less that of the arrival."""
    ends = (history.DELETED, history.MOVED_TO_DEAD_LETTER)
    arrivals = (history.SENT, history.MOVED_IN)
    life = Window.partitionBy("queue", "message_id").orderBy("event_id")
    arrived = F.when(F.col("event").isin(*arrivals), F.col("receive_count"))
    ended = (
        events.where(F.col("event").isin(*ends, *arrivals))
        .select(
            "queue",
            "event",
            F.unix_millis("at").alias("at"),
            "receive_count",
            F.last(arrived, ignorenulls=True).over(life).alias("arrived_with"),
        )
        .where(F.col("event").isin(*ends) & F.col("arrived_with").isNotNull())
    )
    ended = _completed(ended, "at", completed_since).select(
        "queue", "event", (F.col("receive_count") - F.col("arrived_with")).alias("receives")
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
        exact=exact,
    )
