"""The Spark session the reader uses: local by default, quiet, sized for small machines."""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
APP_NAME = "durableq-analytics"

#: Settings of a session the reader starts itself.  Queue tables are small
#: next to what Spark is built for, so few shuffle partitions; no web UI;
#: UTC, so timestamps print as they are stored; Parquet with standard
#: microsecond timestamps rather than the legacy INT96.
SESSION_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def start_session(master: str | None, jar: Path) -> tuple[SparkSession, bool]:
    """The session to read with, and whether this call started it (so its owner stops it).

    A session already active in this process is reused as it is: Spark allows
    one context per process, and its owner chose its master and class path.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        log.debug("reusing the active Spark session (master %s)", active.sparkContext.master)
        return active, False
    builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName(APP_NAME)
    builder = builder.config("spark.jars", str(jar))
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session, True
