"""The calls behind ``durableq analyze`` and ``durableq export``: one library call per command.

Each opens a snapshot, does its work, and closes it (stopping Spark if it
started it).  Results are plain Python: lists of row dicts whose values are
``str``, ``int``, ``float``, ``bool``, ``None`` or timezone-aware UTC
``datetime``, ready for a table or ``json.dumps(..., default=str)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from ..errors import InvalidParameterValue
from ..types import datetime_from_ms
from .errors import AnalyticsError
from .plot import write_activity_png
from .reader import QueueAnalytics
from .reports import REPORTS

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
    clock: Callable[[], float] | None = None,
    spark: SparkSession | None = None,
    partitions: int | None = None,
) -> dict[str, Rows]:
    """Run one report (a name of :data:`REPORT_NAMES`) or ``"all"`` over a snapshot of ``path``.

    Returns ``{"snapshot": [{"source", "taken_at"}], <report name>: rows, ...}``
    with the reports in :data:`REPORT_NAMES` order.  ``queue`` limits every
    report to one queue (QueueDoesNotExist if the snapshot has none of that
    name).  ``plot``: also write a PNG of depth and throughput over time there.
    """
    if report != ALL and report not in REPORTS:
        raise InvalidParameterValue(f"unknown report {report!r}; choose {ALL!r} or one of {', '.join(REPORT_NAMES)}")
    names = REPORT_NAMES if report == ALL else (report,)
    with QueueAnalytics.open(
        path, spark=spark, master=master, jdbc_jar=jar, clock=clock, partitions=partitions
    ) as analytics:
        result: dict[str, Rows] = {"snapshot": [{"source": str(analytics.source), "taken_at": analytics.taken_at}]}
        for name in names:
            result[name] = to_rows(analytics.report(name, queue))
        if plot is not None:
            activity = result["throughput"] if "throughput" in result else to_rows(analytics.throughput(queue))
            title = f"durableq activity: {queue or analytics.source.name} (snapshot {analytics.taken_at:%Y-%m-%d %H:%M} UTC)"
            write_activity_png(activity, plot, title=title)
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
) -> Rows:
    """Write a snapshot's tables as Parquet under ``out_dir`` (a path or a URL Spark can write).

    One folder per table of :data:`EXPORTED_TABLES`: ``messages``, ``queues``
    and ``metrics`` with the columns of the DataFrames of the same names, and
    ``snapshot`` with one row (``source``, ``taken_at``).  Returns one row per
    table: ``{"table", "path", "rows"}``.  Existing folders are an error
    unless ``overwrite``.
    """
    base = str(out_dir).rstrip("/")
    if not overwrite and "://" not in base:
        # A local folder is checked up front, so a refused export writes nothing at all.
        existing = [f"{base}/{t}" for t in EXPORTED_TABLES if os.path.exists(f"{base}/{t}")]
        if existing:
            raise AnalyticsError(f"{', '.join(existing)} already exist(s); remove them or export with overwrite")
    written: Rows = []
    with QueueAnalytics.open(
        path, spark=spark, master=master, jdbc_jar=jar, clock=clock, partitions=partitions
    ) as analytics:
        about = analytics.spark.range(1).select(
            F.lit(str(analytics.source)).alias("source"),
            F.timestamp_millis(F.lit(analytics.now_ms)).alias("taken_at"),
        )
        frames = {"messages": analytics.messages(), "queues": analytics.queues(), "metrics": analytics.metrics()}
        for name, frame in {**frames, "snapshot": about}.items():
            target = f"{base}/{name}"
            try:
                frame.write.mode("overwrite" if overwrite else "errorifexists").parquet(target)
            except AnalysisException as exc:
                if "already exists" not in str(exc).lower():
                    raise
                raise AnalyticsError(f"{target} already exists; remove it or export with overwrite") from exc
            written.append({"table": name, "path": target, "rows": frame.count()})
    return written


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
