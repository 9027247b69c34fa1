"""``QueueAnalytics``: Spark DataFrames and reports over a snapshot of one durableq file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import limits, validation
from ..errors import InvalidParameterValue, QueueDoesNotExist
from . import reports
from .driver import driver_of
from .errors import AnalyticsError
from .events import read_event_table
from .frames import read_depth, read_messages, read_metrics, read_queues, read_unswept
from .session import plan_session, start_session
from .snapshot import Snapshot, take
from .window import EVERYTHING, TimeWindow, time_window


class QueueAnalytics(AbstractContextManager["QueueAnalytics"]):
    """Read-only analytics over a consistent snapshot of a durableq file.

    Use :meth:`open`; close it (or use it as a context manager) to remove the
    snapshot and, if this object started Spark, stop it.
    """

    def __init__(
        self,
        spark: SparkSession,
        snapshot: Snapshot,
        *,
        owns_spark: bool,
        partitions: int,
        window: TimeWindow = EVERYTHING,
    ) -> None:
        self._spark = spark
        self._snapshot = snapshot
        self._owns_spark = owns_spark
        self._partitions = partitions
        self._window = window
        self._messages: DataFrame | None = None
        self._tables: reports.Tables | None = None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        spark: SparkSession | None = None,
        master: str | None = None,
        jdbc_jar: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] | None = None,
        partitions: int | None = None,
        snapshot_dir: str | os.PathLike[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        schema: str | None = None,
        conf: Mapping[str, str] | None = None,
        verbose: bool = False,
    ) -> QueueAnalytics:
        """Snapshot the durableq database at ``path`` (a file, or a ``postgresql://`` URL) and get
        ready to read it with Spark.

        ``spark``: a session to use as it is (it must have the SQLite JDBC
        driver on its class path).  Else the session active in this process is
        used as it is; else, under ``spark-submit``, one is created from
        spark-submit's configuration (its master, name and settings win;
        durableq adds the driver jar with ``ADD JAR`` unless ``spark.jars``
        names one); else durableq starts one on ``master`` (default
        ``local[*]``) with the jar found by
        :func:`~durableq.analytics.find_jdbc_jar`.  A ``master`` that differs
        from the running one is an error, never silently ignored.
        ``clock`` (seconds since the epoch, default ``time.time``) gives the
        snapshot time that message states and ages are computed at.
        ``partitions``: how many parallel reads of the messages table, of equal
        size (default: Spark's default parallelism).  ``snapshot_dir``: where
        the copy goes (default: a private folder in the temp folder); on a
        cluster, storage every executor reads (see
        :func:`~durableq.analytics.snapshot.take` for the permissions); on
        PostgreSQL nothing is copied and it does not apply (every executor
        connects to the database: see ``durableq.engines.postgres.snapshot``).
        ``since``/``until`` (timezone-aware datetimes): only messages sent, and
        counter minutes, in ``[since, until)``; SQLite applies the window, so
        the rest of the file is never read into Spark.  ``schema``: on
        PostgreSQL, the schema of durableq's tables (as :func:`durableq.open`).
        ``conf``: Spark settings (``{"spark.executor.memory": "4g"}``, as ``spark-submit --conf``)
        for the session durableq creates; spark-submit's own win, and a running session must
        already have them.  ``verbose``: in a session durableq starts, Spark's own logging (its WARN
        lines) rather than errors only.
        """
        if spark is not None and (master is not None or jdbc_jar is not None or conf):
            raise InvalidParameterValue(
                "give either spark or master/jdbc_jar/conf: a given session keeps its own"
            )
        if clock is not None and not callable(clock):
            raise InvalidParameterValue("clock must be a callable returning seconds since the epoch")
        if partitions is not None:
            validation.integer("partitions", partitions, 1, limits.MAX_ANALYTICS_PARTITIONS, "reads")
        window = time_window(since, until)
        clock = clock or time.time
        # Decided (and a missing driver found) before copying anything; started after the copy.
        driver = driver_of(path)
        plan = None if spark is not None else plan_session(master, jdbc_jar, driver, conf, verbose=verbose)
        snapshot = take(path, clock, snapshot_dir, schema=schema)
        owns = False
        try:
            if plan is not None:
                spark, owns = start_session(plan)
        except BaseException:
            snapshot.close()
            raise
        assert spark is not None
        partitions = partitions or default_parallelism(spark)
        return cls(spark, snapshot, owns_spark=owns, partitions=partitions, window=window)

    # -- lifecycle ----------------------------------------------------------------

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop cached data, remove the snapshot, and stop Spark if this object started it."""
        if self._tables is not None:
            self._tables.messages.unpersist()
            self._tables.events.unpersist()
            self._tables = None
        self._messages = None
        self._snapshot.close()
        if self._owns_spark:
            self._owns_spark = False
            self._spark.stop()

    def __repr__(self) -> str:
        return f"<durableq.analytics.QueueAnalytics {self._snapshot!r}>"

    # -- the snapshot -------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        return self._spark

    @property
    def source(self) -> Path | str:
        """The durableq database the snapshot was taken of: a file's path, or a PostgreSQL URL
        (without its password)."""
        return self._snapshot.source

    @property
    def source_name(self) -> str:
        """A short name of the source: the file's name, or the database's."""
        return self._snapshot.name

    @property
    def snapshot_path(self) -> Path | None:
        """The copy Spark reads (gone after :meth:`close`); None on PostgreSQL, where Spark reads
        the live tables through an exported snapshot."""
        return self._snapshot.path

    @property
    def taken_at(self) -> datetime:
        """The snapshot time (UTC): states and ages are as of this moment."""
        return self._snapshot.taken_at

    @property
    def now_ms(self) -> int:
        """The snapshot time in epoch milliseconds."""
        return self._snapshot.now_ms

    def _open_snapshot(self) -> Snapshot:
        if self._snapshot.closed:
            raise AnalyticsError("this QueueAnalytics is closed; open a new one to read again")
        return self._snapshot

    @property
    def window(self) -> TimeWindow:
        """The time window every frame and report is limited to."""
        return self._window

    # -- tables -------------------------------------------------------------------

    def messages(self) -> DataFrame:
        """Unexpired messages at the snapshot time, sent in the window.

        Not cached before your filters: those on ``queue``, ``state``,
        ``receive_count`` ... reach SQLite, so only matching rows are read.
        (Once a report has run, Spark may answer from the report's cached copy
        of the window's messages instead.)
        """
        snapshot = self._open_snapshot()
        if self._messages is None:  # the frame (a plan, no data) is kept: its split points are a query
            self._messages = read_messages(self._spark, snapshot, self._partitions, self._window)
        return self._messages

    def queues(self) -> DataFrame:
        """One row per queue with its settings."""
        return read_queues(self._spark, self._open_snapshot())

    def metrics(self) -> DataFrame:
        """The per-minute counters of every queue, for the minutes that overlap the window."""
        return read_metrics(self._spark, self._open_snapshot(), self._window.since_ms, self._window.until_ms)

    def events(self) -> DataFrame:
        """The message events (:data:`~durableq.analytics.EVENTS_SCHEMA`) of the queues that keep
        history, in the window (on ``at``).

        Not cached: filters on ``queue``, ``event``, ``event_id`` ... reach SQLite.
        """
        snapshot = self._open_snapshot()
        return read_event_table(self._spark, snapshot, "events", self._window, partitions=self._partitions)

    def audit(self) -> DataFrame:
        """The audit trail (:data:`~durableq.analytics.AUDIT_SCHEMA`) in the window (on ``at``).

        Not cached: filters on ``action``, ``queue``, ``event_id`` ... reach SQLite.
        """
        return read_event_table(self._spark, self._open_snapshot(), "audit", self._window)

    def tables(self) -> reports.Tables:
        """What the reports read; the window's messages are cached (after the window is applied)."""
        snapshot = self._open_snapshot()
        if self._tables is None:
            metrics = self.metrics()
            to_now = metrics
            if self._window.until_ms is not None:
                to_now = read_metrics(self._spark, snapshot, self._window.since_ms)
            self._tables = reports.Tables(
                messages=self.messages().persist(),
                queues=self.queues(),
                metrics=metrics,
                metrics_to_now=to_now,
                depth_now=read_depth(self._spark, snapshot),
                unswept=read_unswept(self._spark, snapshot),
                events=self.events().persist(),
                window=self._window,
                events_until=lambda: read_event_table(
                    self._spark,
                    snapshot,
                    "events",
                    TimeWindow(None, self._window.until_ms),
                    partitions=self._partitions,
                ),
            )
        return self._tables

    def queue_names(self) -> list[str]:
        return sorted(row.queue for row in self.queues().select("queue").collect())

    # -- reports ------------------------------------------------------------------

    def report(
        self, name: str, queue: str | None = None, *, exact: bool = False, completed_in_window: bool = False
    ) -> DataFrame:
        """Report ``name`` (one of :data:`~durableq.analytics.REPORT_NAMES`), for ``queue`` or all queues.

        ``exact``: exact percentiles, not approximate ones; ``completed_in_window``: the history
        reports count the messages completed in the window, whenever sent (see :class:`.reports.Options`).
        """
        reports.check_name(name)
        if queue is not None and queue not in self.queue_names():
            raise QueueDoesNotExist(f"queue {queue!r} does not exist in {self.source}")
        options = reports.Options(exact=exact, completed_in_window=completed_in_window)
        return reports.build(name, self.tables(), queue, options)

    def depth_by_state(self, queue: str | None = None) -> DataFrame:
        """Messages per queue and state; see :func:`.reports.depth_by_state`."""
        return self.report("depth", queue)

    def age_percentiles(self, queue: str | None = None) -> DataFrame:
        """Age percentiles per queue; see :func:`.reports.age_percentiles`."""
        return self.report("ages", queue)

    def receive_count_histogram(self, queue: str | None = None) -> DataFrame:
        """Messages per receive count; see :func:`.reports.receive_count_histogram`."""
        return self.report("receive-counts", queue)

    def dead_letter_rates(self, queue: str | None = None) -> DataFrame:
        """Dead-letter moves per source queue; see :func:`.reports.dead_letter_rates`."""
        return self.report("dead-letters", queue)

    def throughput(self, queue: str | None = None) -> DataFrame:
        """Counters and depth per minute; see :func:`.reports.throughput`."""
        return self.report("throughput", queue)

    def latency(self, queue: str | None = None) -> DataFrame:
        """Seconds from send to delete per queue; see :func:`.lifetimes.latency`."""
        return self.report("latency", queue)

    def processing(self, queue: str | None = None) -> DataFrame:
        """Seconds from the last receive to the delete per queue; see :func:`.lifetimes.processing`."""
        return self.report("processing", queue)

    def retries(self, queue: str | None = None) -> DataFrame:
        """Receives before the delete or dead letter per queue; see :func:`.lifetimes.retries`."""
        return self.report("retries", queue)

    def wait(self, queue: str | None = None) -> DataFrame:
        """Seconds from the send, and from visible, to the first receive; see :func:`.lifetimes.wait`."""
        return self.report("wait", queue)


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism (at most :data:`~durableq.limits.MAX_ANALYTICS_PARTITIONS`), asked
    through the DataFrame API, which a Spark Connect client has too (it has no ``sparkContext``).

    A range with no partition count is split into the default parallelism's partitions, the last of
    them holding the range's last row.
    """
    ids = spark.range(limits.MAX_ANALYTICS_PARTITIONS).select(F.spark_partition_id().alias("partition"))
    last = ids.agg(F.max("partition").alias("last")).first()
    assert last is not None
    return min(int(last["last"]) + 1, limits.MAX_ANALYTICS_PARTITIONS)
