"""Spark analytics over durableq databases: DataFrames and reports read through JDBC.

    from durableq.analytics import QueueAnalytics

    with QueueAnalytics.open("queue.db") as analytics:
        analytics.depth_by_state().show()
        analytics.messages().where("state = 'in_flight'").groupBy("queue").count().show()

Spark reads a consistent snapshot: of a SQLite file, a copy made with SQLite's
backup API; of a PostgreSQL database (a ``postgresql://`` URL), the live tables
through a repeatable-read snapshot that one transaction exports.  This package
is the optional extra ``durableq[spark]``; it needs pyspark, Java and the JDBC
driver of the engine (see :func:`find_jdbc_jar`).
"""

from __future__ import annotations

from .errors import AnalyticsError, JdbcDriverNotFound, SparkExtraMissing

try:
    import pyspark  # imported here first to say clearly when it is missing
except ImportError as exc:
    raise SparkExtraMissing("pyspark") from exc

from .driver import find_jdbc_jar
from .events import AUDIT_SCHEMA, EVENT_STREAM_FORMAT, EVENT_TABLES, EVENTS_SCHEMA
from .frames import COUNTERS, STATES
from .incremental import committed_files, export_events, export_schema, read_export
from .plot import write_activity_png
from .reader import QueueAnalytics
from .reports import Tables
from .run import ALL, EXPORTED_TABLES, REPORT_NAMES, export_parquet, run_report, to_rows
from .snapshot import Snapshot
from .window import TimeWindow


def register_event_stream(spark: pyspark.sql.SparkSession) -> None:
    """Make ``spark.readStream.format("durableq-events").option("path", FILE)`` available in
    ``spark``: a Structured Streaming source over message history (see ``stream.py``).  Needs
    PySpark 4's Python data source API and pyarrow."""
    try:
        from .stream import register
    except ImportError as exc:  # PySpark 3.5, or no pyarrow
        raise AnalyticsError(
            f"the {EVENT_STREAM_FORMAT} stream needs PySpark 4 (its Python data source API) and pyarrow: "
            f"{exc}; use `durableq export DIR --incremental` instead"
        ) from exc
    register(spark)


__all__ = [
    "ALL",
    "AUDIT_SCHEMA",
    "COUNTERS",
    "EVENTS_SCHEMA",
    "EVENT_STREAM_FORMAT",
    "EVENT_TABLES",
    "EXPORTED_TABLES",
    "REPORT_NAMES",
    "STATES",
    "AnalyticsError",
    "JdbcDriverNotFound",
    "QueueAnalytics",
    "Snapshot",
    "SparkExtraMissing",
    "Tables",
    "TimeWindow",
    "committed_files",
    "export_events",
    "export_parquet",
    "export_schema",
    "find_jdbc_jar",
    "read_export",
    "register_event_stream",
    "run_report",
    "to_rows",
    "write_activity_png",
]
