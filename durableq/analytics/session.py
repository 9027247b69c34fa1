"""The Spark session the reader uses: the one already running, the one ``spark-submit`` set up, or its own.

Whoever configured Spark first wins.  A session active in this process (a classic one, or a
Spark Connect client) is used as it is.  Under ``spark-submit`` (or the ``pyspark`` shell) the JVM is
already running with its master, application name and settings; durableq creates the session from
that configuration and only adds what it needs (the JDBC driver), the SQL settings nobody gave and
the caller's ``conf`` where spark-submit names no value.  Only when it starts Spark itself does it
pick the master (``local[*]`` unless told) and the application name; such a session listens on
loopback when its master is local, and logs errors only unless ``verbose``.

The settings of a running session are read through ``session.conf`` and its SQL, never its
``sparkContext``, which a Spark Connect client does not have.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from ..errors import InvalidParameterValue
from . import scratch
from .driver import SQLITE, Driver, find_jdbc_jar
from .errors import JdbcDriverNotFound
from .quiet import jvm_start_up_filtered, quiet_conf

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

LOOPBACK = "127.0.0.1"
#: Where the driver of a local session listens: its RPC endpoint and its block manager (which serves
#: cached blocks without authentication) on loopback, out of the network's reach.  Spark's own
#: default is the host's external address.
LOOPBACK_CONF = {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK}
#: The masters whose executors run on this host (so may reach a driver on loopback).
_LOCAL_MASTERS = ("local", "local[", "local-cluster[")
#: Settings that ``conf`` may not give: they have their own arguments.
_NOT_IN_CONF = {"spark.master": "master (--master)"}

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
    #: Spark settings for the session (``--conf``), checked by :func:`check_conf`.
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Spark's own logging (WARN and its start-up lines) rather than errors only.
    verbose: bool = False


def check_conf(conf: Mapping[str, str] | None) -> dict[str, str]:
    """``conf`` as a dict of Spark settings (``spark.`` names to text values), or a clear error."""
    if conf is None:
        return {}
    if not isinstance(conf, Mapping):
        raise InvalidParameterValue(f"conf must be a mapping of Spark setting names to values, not {conf!r}")
    for key, value in conf.items():
        if not isinstance(key, str) or not key.startswith("spark.") or key.strip() != key:
            raise InvalidParameterValue(
                f"conf names Spark settings, which start with 'spark.' (spark-submit ignores other names); "
                f"got {key!r}"
            )
        if not isinstance(value, str):
            raise InvalidParameterValue(f"conf values are text, as Spark's are; {key} is {value!r}")
        if key in _NOT_IN_CONF:
            raise InvalidParameterValue(f"give {key} as {_NOT_IN_CONF[key]}, not in conf")
    return dict(conf)


def plan_session(
    master: str | None,
    jdbc_jar: str | os.PathLike[str] | None,
    driver: Driver = SQLITE,
    conf: Mapping[str, str] | None = None,
    *,
    verbose: bool = False,
) -> SessionPlan:
    """Decide where the session comes from; raise now if ``master`` or ``conf`` contradicts a
    running session.  ``driver``: the JDBC driver the snapshot is read with (SQLite's, or
    PostgreSQL's).  ``conf``: Spark settings (``KEY: VALUE``) for the session durableq creates;
    ``verbose``: Spark's own logging rather than errors only, in a session durableq starts."""
    settings = check_conf(conf)
    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.conf.get("spark.master", None)
        if master is not None and master != running:
            raise InvalidParameterValue(
                f"a Spark session is already running on master {running!r}; master {master!r} applies "
                "only when durableq starts Spark (leave it out to use the running session)"
            )
        differ = sorted(k for k, v in settings.items() if active.conf.get(k, None) != v)
        if differ:
            raise InvalidParameterValue(
                f"a Spark session is already running, without conf's {', '.join(differ)}; conf applies "
                "only when durableq starts Spark (set it on the running session, or leave it out)"
            )
        # A jar named for a running session is still checked (a typo must not pass), then added to it;
        # else the driver's jar is added if the session's jars do not name it and it can be found.
        jar = _jar_for(active, jdbc_jar, driver)
        return SessionPlan(active, False, master, jdbc_jar, jar, driver, settings, verbose)
    if os.environ.get(_GATEWAY_VARIABLE):
        # The jar, if given, is checked now; otherwise only once the configuration shows it is needed.
        jar = None if jdbc_jar is None else find_jdbc_jar(jdbc_jar, driver=driver)
        return SessionPlan(None, True, master, jdbc_jar, jar, driver, settings, verbose)
    jar = find_jdbc_jar(jdbc_jar, driver=driver)
    return SessionPlan(None, False, master, jdbc_jar, jar, driver, settings, verbose)


def own_session_conf(master: str, conf: Mapping[str, str], *, verbose: bool = False) -> dict[str, str]:
    """The settings of a session durableq starts on ``master``: :data:`SESSION_CONF`; the driver on
    loopback (:data:`LOOPBACK_CONF`) if the master is local, unless ``SPARK_LOCAL_IP`` or ``conf``
    names the driver's address; ``conf`` over those; and errors-only logging unless ``verbose``."""
    settings = dict(SESSION_CONF)
    if (
        master.startswith(_LOCAL_MASTERS)
        and not os.environ.get("SPARK_LOCAL_IP")
        and not LOOPBACK_CONF.keys() & conf.keys()
    ):
        settings.update(LOOPBACK_CONF)
    settings.update(conf)
    return settings if verbose else quiet_conf(settings)


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
    return f"{session.conf.get('spark.jars', '')},{session.conf.get('spark.jars.packages', '')}"


def start_session(plan: SessionPlan) -> tuple[SparkSession, bool]:
    """The session to read with, and whether this call created it (so its owner stops it)."""
    if plan.active is not None:
        log.debug("using the active Spark session (master %s)", plan.active.conf.get("spark.master", None))
        if plan.jar is not None:
            add_jar(plan.active, plan.jar)
        return plan.active, False
    if plan.submitted:
        return _from_submitted_configuration(plan), True
    assert plan.jar is not None
    master = plan.master or DEFAULT_MASTER
    settings = own_session_conf(master, plan.conf, verbose=plan.verbose)
    settings["spark.jars"] = ",".join(filter(None, (plan.conf.get("spark.jars"), str(plan.jar))))
    # Spark's Python workers (the events stream) run this interpreter, the one that has durableq,
    # unless the environment names another (PySpark reads PYSPARK_PYTHON when the context starts).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.setdefault("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    builder = SparkSession.builder.master(master).appName(APP_NAME)
    for key, value in settings.items():
        builder = builder.config(key, value)
    # Spark's scratch files (shuffle blocks, its Python files) in a run folder of their own, which
    # the next run removes if this process is killed before Spark removes them (see .scratch).
    local = scratch.run_folder(None)
    atexit.register(scratch.remove, local)
    builder = builder.config("spark.local.dir", str(local))
    if plan.verbose:
        return builder.getOrCreate(), True
    with jvm_start_up_filtered():
        return builder.getOrCreate(), True


def _from_submitted_configuration(plan: SessionPlan) -> SparkSession:
    # No master, name or static setting of durableq's here: spark-submit's (and spark-defaults.conf's)
    # apply.  The caller's conf fills in what they do not name: read from the JVM spark-submit started.
    # (SparkConf reads the JVM's settings only once PySpark has attached to it; until then it is empty.)
    SparkContext._ensure_initialized()
    submitted = SparkConf()
    builder = SparkSession.builder
    for key, value in plan.conf.items():
        if submitted.contains(key):
            log.info("spark-submit's %s=%s wins over conf's %s", key, submitted.get(key), value)
        else:
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    try:
        running = session.conf.get("spark.master", None)
        if plan.master is not None and plan.master != running:
            raise InvalidParameterValue(
                f"this process runs under spark-submit with master {running!r}; give the master to "
                f"spark-submit (--master {plan.master}) rather than to durableq"
            )
        for key in RUNTIME_CONF:
            if not submitted.contains(key) and key not in plan.conf:
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
