"""The Spark session the reader uses: the one already running, the one ``spark-submit`` set up, or its own.

Whoever configured Spark first wins.  A session active in this process is used
as it is.  Under ``spark-submit`` (or the ``pyspark`` shell) the JVM is already
running with its master, application name and settings; durableq creates the
session from that configuration and only adds what it needs (the JDBC driver)
and the SQL settings nobody gave.  Only when it starts Spark itself does it
pick the master (``local[*]`` unless told) and the application name.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from ..errors import InvalidParameterValue
from . import scratch
from .driver import SQLITE, Driver, find_jdbc_jar
from .errors import JdbcDriverNotFound

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
#: Of those, the ones a running JVM still takes (per session), when its configuration does not name them.
RUNTIME_CONF = (
    "spark.sql.shuffle.partitions",
    "spark.sql.session.timeZone",
    "spark.sql.parquet.outputTimestampType",
)

#: PySpark sets this in the Python process that spark-submit (or the pyspark shell) starts:
#: the JVM, with its configuration, already runs.  (PySpark reads the same variable to attach to it.)
_GATEWAY_VARIABLE = "PYSPARK_GATEWAY_PORT"


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """Which session to use, decided before anything is copied or started."""

    active: SparkSession | None
    submitted: bool
    master: str | None
    jdbc_jar: str | os.PathLike[str] | None
    #: The driver jar to give a session durableq starts (found up front, so a missing one fails fast).
    jar: Path | None
    driver: Driver = SQLITE


def plan_session(
    master: str | None, jdbc_jar: str | os.PathLike[str] | None, driver: Driver = SQLITE
) -> SessionPlan:
    """Decide where the session comes from; raise now if ``master`` contradicts a running session.
    ``driver``: the JDBC driver the snapshot is read with (SQLite's, or PostgreSQL's)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if master is not None and master != running:
            raise InvalidParameterValue(
                f"a Spark session is already running on master {running!r}; master {master!r} applies "
                "only when durableq starts Spark (leave it out to use the running session)"
            )
        # A jar named for a running session is still checked (a typo must not pass), then added to it;
        # else the driver's jar is added if the session's jars do not name it and it can be found.
        return SessionPlan(active, False, master, jdbc_jar, _jar_for(active, jdbc_jar, driver), driver)
    if os.environ.get(_GATEWAY_VARIABLE):
        # The jar, if given, is checked now; otherwise only once the configuration shows it is needed.
        return SessionPlan(
            None,
            True,
            master,
            jdbc_jar,
            None if jdbc_jar is None else find_jdbc_jar(jdbc_jar, driver=driver),
            driver,
        )
    return SessionPlan(None, False, master, jdbc_jar, find_jdbc_jar(jdbc_jar, driver=driver), driver)


def _jar_for(active: SparkSession, jdbc_jar: str | os.PathLike[str] | None, driver: Driver) -> Path | None:
    if jdbc_jar is not None:
        return find_jdbc_jar(jdbc_jar, driver=driver)
    if driver.jar_hint in _configured_jars(active):
        return None
    try:
        return find_jdbc_jar(driver=driver)
    except JdbcDriverNotFound:  # the session may have it another way (--driver-class-path): try as it is
        return None


def _configured_jars(session: SparkSession) -> str:
    conf = session.sparkContext.getConf()
    return f"{conf.get('spark.jars', '')},{conf.get('spark.jars.packages', '')}"


def start_session(plan: SessionPlan) -> tuple[SparkSession, bool]:
    """The session to read with, and whether this call created it (so its owner stops it)."""
    if plan.active is not None:
        log.debug("using the active Spark session (master %s)", plan.active.sparkContext.master)
        if plan.jar is not None:
            add_jar(plan.active, plan.jar)
        return plan.active, False
    if plan.submitted:
        return _from_submitted_configuration(plan), True
    assert plan.jar is not None
    builder = SparkSession.builder.master(plan.master or DEFAULT_MASTER).appName(APP_NAME)
    builder = builder.config("spark.jars", str(plan.jar))
    # Spark's Python workers (the events stream) run this interpreter, the one that has durableq,
    # unless the environment names another (PySpark reads PYSPARK_PYTHON when the context starts).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    # Spark's scratch files (shuffle blocks, its Python files) in a run folder of their own, which
    # the next run removes if this process is killed before Spark removes them (see .scratch).
    local = scratch.run_folder(None)
    atexit.register(scratch.remove, local)
    builder = builder.config("spark.local.dir", str(local))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session, True


def _from_submitted_configuration(plan: SessionPlan) -> SparkSession:
    # No master, name or static setting here: spark-submit's (and spark-defaults.conf's) apply.
    session = SparkSession.builder.getOrCreate()
    try:
        conf = session.sparkContext.getConf()
        running = session.sparkContext.master
        if plan.master is not None and plan.master != running:
            raise InvalidParameterValue(
                f"this process runs under spark-submit with master {running!r}; give the master to "
                f"spark-submit (--master {plan.master}) rather than to durableq"
            )
        for key in RUNTIME_CONF:
            if not conf.contains(key):
                session.conf.set(key, SESSION_CONF[key])
        if plan.jdbc_jar is not None or plan.driver.jar_hint not in _configured_jars(session):
            add_jar(session, plan.jar or find_jdbc_jar(plan.jdbc_jar, driver=plan.driver))
    except BaseException:
        session.stop()
        raise
    return session


def add_jar(session: SparkSession, jar: Path) -> None:
    """Add ``jar`` to a running session (its driver and executors)."""
    # The JVM is running, so spark.jars would no longer reach the driver's class path;
    # ADD JAR does (and ships the jar to the executors).
    quoted = str(jar).replace("\\", "\\\\").replace("'", "\\'")
    session.sql(f"ADD JAR '{quoted}'")
