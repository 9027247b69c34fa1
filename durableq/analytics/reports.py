"""Ready-made reports over the queue tables, each a Spark DataFrame.

Every report takes the same :class:`Tables` and returns one row per queue
(or per queue and minute, or per queue and receive count), sorted, with
stable column names; :data:`REPORTS` names them for the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .. import limits
from ..errors import InvalidParameterValue
from . import lifetimes
from .frames import COUNTERS, STATES
from .lifetimes import ACCURACY, PERCENTILES, percentile_name, percentiles
from .window import EVERYTHING, TimeWindow

__all__ = [
    "ACCURACY",
    "HISTORY_REPORTS",
    "PERCENTILES",
    "REPORTS",
    "Options",
    "Tables",
    "age_percentiles",
    "build",
    "check_name",
    "dead_letter_rates",
    "depth_by_state",
    "receive_count_histogram",
    "throughput",
]


@dataclass(frozen=True, slots=True)
class Tables:
    """The frames of one snapshot that the reports read, limited to one time window."""

    #: Unexpired messages sent in the window.
    messages: DataFrame
    queues: DataFrame
    #: Counter minutes that overlap the window.
    metrics: DataFrame
    #: Counter minutes from the window's start to the snapshot time (the depth walks back over them).
    metrics_to_now: DataFrame
    #: ``queue``, ``depth``: unexpired messages per queue at the snapshot time, whatever the window.
    depth_now: DataFrame
    #: ``queue``, ``minute``, ``expired_unswept``: expired messages no sweep has counted yet.
    unswept: DataFrame
    #: Message events (``EVENTS_SCHEMA``) in the window.
    events: DataFrame
    window: TimeWindow = EVERYTHING
    #: Reads the message events before the window's end, whatever their start: the "completed in the
    #: window" mode reads the earlier events of the messages that completed in it (None: ``events``).
    #: A call, so a snapshot that never runs that mode never plans the read (its split points are a query).
    events_until: Callable[[], DataFrame] | None = None


@dataclass(frozen=True, slots=True)
class Options:
    """How a report is computed.

    ``exact``: exact percentiles (Spark's ``percentile``, interpolated), not
    ``percentile_approx``.  ``completed_in_window``: the history reports count
    the messages that completed in the time window (deleted, dead-lettered or,
    for ``wait``, first received), whenever they were sent; without it a
    message counts when all the events a report needs are in the window.
    """

    exact: bool = False
    completed_in_window: bool = False


def depth_by_state(tables: Tables) -> DataFrame:
    """Messages per queue and state (``visible``, ``in_flight``, ``delayed``) and their ``total``.

    The same numbers ``Queue.stats()`` gives at the snapshot time; queues
    without messages show zeros.
    """
    counts = tables.messages.groupBy("queue").pivot("state", list(STATES)).count()
    depth = tables.queues.select("queue").join(counts, "queue", "left").fillna(0, subset=list(STATES))
    total = sum((F.col(state) for state in STATES), F.lit(0))
    columns = [F.col(s).cast("long").alias(s) for s in STATES]
    return depth.select("queue", *columns, total.cast("long").alias("total"))


def age_percentiles(tables: Tables, options: Options = Options()) -> DataFrame:
    """Per queue: ``messages``, the age percentiles ``p50``/``p90``/``p95``/``p99`` and ``oldest`` (seconds).

    Ages are counted from the send to the snapshot time.  ``oldest`` is whole
    seconds, as ``QueueStats.oldest_message_age`` (0 for an empty queue); the
    percentiles are null for an empty queue.
    """
    ages = tables.messages.groupBy("queue").agg(
        F.count(F.lit(1)).alias("messages"),
        percentiles("age_seconds", exact=options.exact).alias("percentiles"),
        F.floor(F.max("age_seconds")).alias("oldest"),
    )
    columns = [F.col("percentiles")[i].alias(percentile_name(p)) for i, p in enumerate(PERCENTILES)]
    return (
        tables.queues.select("queue")
        .join(ages, "queue", "left")
        .select(
            "queue",
            F.coalesce("messages", F.lit(0)).alias("messages"),
            *columns,
            F.coalesce("oldest", F.lit(0)).cast("long").alias("oldest"),
        )
    )


def receive_count_histogram(tables: Tables) -> DataFrame:
    """How many messages of each queue have been received how often (``receive_count``, ``messages``)."""
    return tables.messages.groupBy("queue", "receive_count").agg(F.count(F.lit(1)).alias("messages"))


def dead_letter_rates(tables: Tables) -> DataFrame:
    """Per source queue (one with a redrive policy, or whose messages were dead-lettered):

    ``received`` and ``moved_to_dead_letter`` summed over the per-minute
    counters, ``dead_letter_rate`` = moved / received (null before any
    receive), and ``in_dead_letter_queues``: messages from this queue that
    sit in a dead-letter queue at the snapshot time.
    """
    totals = tables.metrics.groupBy("queue").agg(
        *(F.sum(c).alias(c) for c in ("received", "deleted", "moved_to_dead_letter"))
    )
    held = (
        tables.messages.where(F.col("dead_letter_source").isNotNull())
        .groupBy(F.col("dead_letter_source").alias("queue"))
        .agg(F.count(F.lit(1)).alias("in_dead_letter_queues"))
    )
    counts = ["received", "deleted", "moved_to_dead_letter", "in_dead_letter_queues"]
    rates = (
        tables.queues.select("queue", "dead_letter_queue", "max_receive_count")
        .join(totals, "queue", "left")
        .join(held, "queue", "left")
        .fillna(0, subset=counts)
    )
    # Rounded (limits.RATE_DIGITS): a share of receives, not the 17 digits of a double.
    moved_share = F.round(F.col("moved_to_dead_letter") / F.col("received"), limits.RATE_DIGITS)
    rate = F.when(F.col("received") > 0, moved_share)
    return rates.where(
        F.col("dead_letter_queue").isNotNull()
        | (F.col("moved_to_dead_letter") > 0)
        | (F.col("in_dead_letter_queues") > 0)
    ).select(
        "queue",
        "dead_letter_queue",
        "max_receive_count",
        *(F.col(c).cast("long").alias(c) for c in counts[:3]),
        rate.alias("dead_letter_rate"),
        F.col("in_dead_letter_queues").cast("long").alias("in_dead_letter_queues"),
    )


def throughput(tables: Tables) -> DataFrame:
    """Per queue and minute: the counters, ``expired_unswept`` and the ``depth`` at the minute's end.

    ``expired_unswept``: messages that expired that minute and that no sweep
    has counted yet (they left the depth then; ``expired`` counts a message
    only when a sweep removes it).  ``depth`` walks back from the snapshot's
    depth: before a minute there were ``sent + moved_in - deleted -
    moved_to_dead_letter - moved_out - expired - expired_unswept - purged``
    fewer.  Every way in and out is counted, so it is the depth
    ``Queue.stats()`` gave at the end of that minute (up to the last second of
    counts of a broker killed without closing).
    """
    changes = _minute_changes(tables)
    arrived = F.col("sent") + F.col("moved_in")
    left = sum(
        (F.col(c) for c in ("moved_to_dead_letter", "moved_out", "expired", "expired_unswept", "purged")),
        F.col("deleted"),
    )
    later = Window.partitionBy("queue").orderBy("minute").rowsBetween(1, Window.unboundedFollowing)
    depth = F.coalesce(F.col("depth"), F.lit(0)) - F.coalesce(F.sum(arrived - left).over(later), F.lit(0))
    columns = (*COUNTERS, "expired_unswept")
    report = changes.join(tables.depth_now, "queue", "left").select(
        "queue",
        "minute",
        *(F.col(c).cast("long").alias(c) for c in columns),
        depth.cast("long").alias("depth"),
    )
    if tables.window.until_ms is not None:
        report = report.where(F.col("minute") < F.timestamp_millis(F.lit(tables.window.until_ms)))
    return report


def _minute_changes(tables: Tables) -> DataFrame:
    """Every count that changes a queue's depth, per queue and minute, from the window's start on."""
    unswept = tables.unswept
    first = tables.window.first_minute_ms
    if first is not None:
        unswept = unswept.where(F.col("minute") >= F.timestamp_millis(F.lit(first)))
    summed = [*COUNTERS, "expired_unswept"]
    changes = tables.metrics_to_now.unionByName(unswept, allowMissingColumns=True)
    # Zero where nothing happened (a minute with only unswept expiries has no counters).
    return changes.groupBy("queue", "minute").agg(*(F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in summed))


Report = Callable[[Tables, Options], DataFrame]


def _history(report: Callable[..., DataFrame]) -> Report:
    """A report of :mod:`.lifetimes` over the tables' events, as the options ask."""

    def make(tables: Tables, options: Options) -> DataFrame:
        events, since = tables.events, None
        if options.completed_in_window and tables.window.since_ms is not None:
            since = tables.window.since_ms
            events = tables.events if tables.events_until is None else tables.events_until()
        return report(events, exact=options.exact, completed_since=since)

    return make


def _plain(report: Callable[[Tables], DataFrame]) -> Report:
    return lambda tables, _options: report(tables)


#: The reports over message history (the ones ``completed_in_window`` applies to).
HISTORY_REPORTS = ("latency", "processing", "retries", "wait")
#: The reports by name (the names the CLI offers), each with the columns it is sorted by.
REPORTS: dict[str, tuple[Report, tuple[str, ...]]] = {
    "depth": (_plain(depth_by_state), ("queue",)),
    "ages": (age_percentiles, ("queue",)),
    "receive-counts": (_plain(receive_count_histogram), ("queue", "receive_count")),
    "dead-letters": (_plain(dead_letter_rates), ("queue",)),
    "throughput": (_plain(throughput), ("queue", "minute")),
    "latency": (_history(lifetimes.latency), ("queue",)),
    "processing": (_history(lifetimes.processing), ("queue",)),
    "retries": (_history(lifetimes.retries), ("queue",)),
    "wait": (_history(lifetimes.wait), ("queue", "measured_from")),
}


def check_name(name: str, *, also: tuple[str, ...] = ()) -> None:
    """InvalidParameterValue unless ``name`` is a report (or one of ``also``)."""
    if name not in REPORTS and name not in also:
        choices = ", ".join((*also, *REPORTS))
        raise InvalidParameterValue(f"unknown report {name!r}; choose one of {choices}")


def build(name: str, tables: Tables, queue: str | None = None, options: Options = Options()) -> DataFrame:
    """Report ``name`` (a key of :data:`REPORTS`), for one queue or all, sorted."""
    make, order = REPORTS[name]
    report = make(tables, options)
    if queue is not None:
        report = report.where(F.col("queue") == F.lit(queue))
    return report.orderBy(*order)
