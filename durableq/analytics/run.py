"""The calls behind ``durableq analyze`` and ``durableq export``: one library call per command.

Each opens a snapshot, does its work, and closes it (stopping Spark if it
started it).  Results are plain Python: lists of row dicts whose values are
``str``, ``int``, ``float``, ``bool``, ``None`` or timezone-aware UTC
``datetime``, ready for a table or ``json.dumps(..., default=str)``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from ..types import datetime_from_ms
from .errors import AnalyticsError
from .outputs import explain_write_failure, for_spark, group_writable
from .plot import write_activity_png
from .reader import QueueAnalytics
from .reports import REPORTS, check_name

#: The report names ``run_report`` accepts, besides ``"all"``.
REPORT_NAMES = tuple(REPORTS)
ALL = "all"
#: The tables ``export_parquet`` writes, one Parquet folder each.
EXPORTED_TABLES = ("messages", "queues", "metrics", "snapshot")

Rows = list[dict[str, Any]]


def run_report(
    path: str | os.PathLike[str],
    report: str = ALL,
    *,
    queue: str | None = None,
    master: str | None = None,
    jar: str | os.PathLike[str] | None = None,
    plot: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] | None = None,
    spark: SparkSession | None = None,
    partitions: int | None = None,
    snapshot_dir: str | os.PathLike[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    schema: str | None = None,
    conf: Mapping[str, str] | None = None,
    verbose: bool = False,
    exact: bool = False,
    completed_in_window: bool = False,
) -> dict[str, Rows]:
    """Run one report (a name of :data:`REPORT_NAMES`) or ``"all"`` over a snapshot of ``path``.

    Returns ``{"snapshot": [{"source", "taken_at"}], <report name>: rows, ...}``
    with the reports in :data:`REPORT_NAMES` order.  ``queue`` limits every
    report to one queue (QueueDoesNotExist if the snapshot has none of that
    name).  ``plot``: also write a PNG of depth and throughput over time there.
    ``out_dir``: also write each report as Parquet, in a folder named after it.
    ``exact`` and ``completed_in_window``: those of :meth:`QueueAnalytics.report`.
    The other arguments are those of :meth:`QueueAnalytics.open`.
    """
    check_name(report, also=(ALL,))  # before any copying or Spark
    names = REPORT_NAMES if report == ALL else (report,)
    with (
        QueueAnalytics.open(
            path,
            spark=spark,
            master=master,
            jdbc_jar=jar,
            clock=clock,
            partitions=partitions,
            snapshot_dir=snapshot_dir,
            since=since,
            until=until,
            schema=schema,
            conf=conf,
            verbose=verbose,
        ) as analytics,
        explained(analytics, out_dir),
    ):
        about = {"source": str(analytics.source), "taken_at": analytics.taken_at}
        result: dict[str, Rows] = {"snapshot": [about]}
        for name in names:
            frame = analytics.report(name, queue, exact=exact, completed_in_window=completed_in_window)
            if out_dir is not None:
                frame.write.mode("overwrite").parquet(f"{for_spark(out_dir)}/{name}")
            result[name] = to_rows(frame)
        if plot is not None:
            activity = result.get("throughput")
            if activity is None:
                activity = to_rows(analytics.throughput(queue))
            taken = f"{analytics.taken_at:%Y-%m-%d %H:%M} UTC"
            title = f"durableq: {queue or analytics.source_name}, snapshot {taken}"
            write_activity_png(activity, plot, title=title, end=analytics.taken_at)
    return result


def export_parquet(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    master: str | None = None,
    jar: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] | None = None,
    spark: SparkSession | None = None,
    partitions: int | None = None,
    snapshot_dir: str | os.PathLike[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    schema: str | None = None,
    conf: Mapping[str, str] | None = None,
    verbose: bool = False,
) -> Rows:
    """Write a snapshot's tables as Parquet under ``out_dir`` (a path or a URL Spark can write).

    One folder per table of :data:`EXPORTED_TABLES`: ``messages``, ``queues``
    and ``metrics`` with the columns of the DataFrames of the same names, and
    ``snapshot`` with one row (``source``, ``taken_at``).  Returns one row per
    table: ``{"table", "path", "rows"}``.  Existing folders are an error
    unless ``overwrite``.  The other arguments are those of :meth:`QueueAnalytics.open`
    (``since``/``until`` limit ``messages`` and ``metrics`` to a time window).
    """
    base = str(out_dir).rstrip("/")
    targets = {table: f"{base}/{table}" for table in EXPORTED_TABLES}
    if not overwrite and "://" not in base:
        # A local folder is checked up front, so a refused export writes nothing at all.
        _refuse_existing([t for t in targets.values() if os.path.exists(t)])
    written: Rows = []
    with (
        QueueAnalytics.open(
            path,
            spark=spark,
            master=master,
            jdbc_jar=jar,
            clock=clock,
            partitions=partitions,
            snapshot_dir=snapshot_dir,
            since=since,
            until=until,
            schema=schema,
            conf=conf,
            verbose=verbose,
        ) as analytics,
        explained(analytics, out_dir),
    ):
        frames = {
            "messages": analytics.messages(),
            "queues": analytics.queues(),
            "metrics": analytics.metrics(),
            "snapshot": analytics.spark.range(1).select(
                F.lit(str(analytics.source)).alias("source"),
                F.timestamp_millis(F.lit(analytics.now_ms)).alias("taken_at"),
            ),
        }
        for table, frame in frames.items():
            try:
                target = f"{for_spark(out_dir)}/{table}"
                frame.write.mode("overwrite" if overwrite else "errorifexists").parquet(target)
            except AnalysisException as exc:
                if "already exists" not in str(exc).lower():
                    raise
                _refuse_existing([targets[table]], exc)
            written.append({"table": table, "path": targets[table], "rows": frame.count()})
    return written


#: What the SQLite driver says when an executor cannot open the copy, and what that means here.
_OPEN_FAILURES = {
    "Permission denied": "permission denied",
    # SQLite's JDBC driver says "unable to open" also for a folder on the path that the executor's
    # OS user may not enter (a private run folder of the driver's user).
    "unable to open": "no such file where the executor runs, or a folder its OS user may not enter",
    "No such file": "no such file where the executor runs, or a folder its OS user may not enter",
}


@contextmanager
def explained(analytics: QueueAnalytics, out_dir: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Turn Spark's failure to open the snapshot copy, or to write under ``out_dir``, (on a cluster,
    usually) into one clear error; writes under a shared ``out_dir`` group-writable (:mod:`.outputs`)."""
    try:
        with group_writable(analytics.spark, out_dir):
            yield
    except Exception as exc:  # py4j wraps the executors' errors in its own types
        text = str(exc)
        if out_dir is not None:
            explain_write_failure(out_dir, exc)
        if analytics.snapshot_path is None or str(analytics.snapshot_path) not in text:
            raise
        reason = next((why for needle, why in _OPEN_FAILURES.items() if needle in text), None)
        if reason is None:
            reason = (
                "in a folder other OS users may not enter"
                if _private(analytics.snapshot_path)
                else "see the cause"
            )
        raise AnalyticsError(
            f"Spark could not open the snapshot copy {analytics.snapshot_path} ({reason}); on a cluster, "
            "give snapshot_dir (--snapshot-dir) an existing folder that every executor mounts at the same "
            "path and that their OS user may enter"
        ) from exc


def _private(path: Path) -> bool:
    """Whether a folder on ``path`` is closed to other OS users (no search bit for others): an executor
    running as another user cannot reach the file, whatever the driver's error text says."""
    try:
        return any(not folder.stat().st_mode & stat.S_IXOTH for folder in path.parents)
    except OSError:
        return False


def _refuse_existing(paths: list[str], cause: BaseException | None = None) -> None:
    if paths:
        raise AnalyticsError(
            f"{', '.join(paths)} already exist; remove them or export with overwrite"
        ) from cause


def to_rows(frame: DataFrame) -> Rows:
    """Collect ``frame`` as row dicts; timestamps become aware UTC datetimes.

    Spark would hand timestamps over as naive datetimes in the local time zone
    of this process, so they travel as epoch milliseconds instead.
    """
    stamps = {f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)}
    if not stamps:
        return [row.asDict() for row in frame.collect()]
    plain = frame.select(*(F.unix_millis(c).alias(c) if c in stamps else F.col(c) for c in frame.columns))
    return [
        {k: datetime_from_ms(v) if k in stamps and v is not None else v for k, v in row.asDict().items()}
        for row in plain.collect()
    ]
