"""Finding the JDBC driver jar that Spark reads a snapshot with: SQLite's, or PostgreSQL's."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..engines.location import file_of
from .errors import JdbcDriverNotFound


@dataclass(frozen=True, slots=True)
class Driver:
    """One engine's JDBC driver: what it is called, and where durableq looks for its jar."""

    name: str
    #: The driver class inside the jar.
    driver_class: str
    #: The environment variable naming the jar.
    variable: str
    #: Where the Debian/Ubuntu package puts the jar.
    system_jar: Path
    #: A word that a configured jar list (spark.jars) naming this driver contains.
    jar_hint: str
    how_to_get: str


SQLITE = Driver(
    "SQLite",
    "org.sqlite.JDBC",
    "DURABLEQ_SQLITE_JDBC_JAR",
    Path("/usr/share/java/sqlite-jdbc.jar"),
    "sqlite-jdbc",
    "install it with `apt-get install libxerial-sqlite-jdbc-java` (it lands in "
    "/usr/share/java/sqlite-jdbc.jar), or download the jar of org.xerial:sqlite-jdbc from Maven Central "
    "(https://repo1.maven.org/maven2/org/xerial/sqlite-jdbc/) and set DURABLEQ_SQLITE_JDBC_JAR "
    "to its path (or pass jdbc_jar=..., `--jar` on the command line)",
)
POSTGRES = Driver(
    "PostgreSQL",
    "org.postgresql.Driver",
    "DURABLEQ_POSTGRES_JDBC_JAR",
    Path("/usr/share/java/postgresql.jar"),
    "postgresql",
    "install it with `apt-get install libpostgresql-jdbc-java` (it lands in "
    "/usr/share/java/postgresql.jar), or download the jar of org.postgresql:postgresql from Maven Central "
    "(https://repo1.maven.org/maven2/org/postgresql/postgresql/) and set DURABLEQ_POSTGRES_JDBC_JAR "
    "to its path (or pass jdbc_jar=..., `--jar` on the command line)",
)


def find_jdbc_jar(
    jdbc_jar: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    system_jar: Path | None = None,
    driver: Driver = SQLITE,
) -> Path:
    """The driver jar: ``jdbc_jar`` if given, else the driver's environment variable
    (``$DURABLEQ_SQLITE_JDBC_JAR``, ``$DURABLEQ_POSTGRES_JDBC_JAR``), else the system jar.

    This is the one place the analytics entry point reads the environment
    (``environ`` defaults to ``os.environ``).  A jar that is named but missing
    is an error rather than a reason to look further: a typo should not
    silently pick another driver.
    """
    env = os.environ if environ is None else environ
    for source, named in (("jdbc_jar", jdbc_jar), (driver.variable, env.get(driver.variable) or None)):
        if named is not None:
            path = Path(named)
            if not path.is_file():
                raise JdbcDriverNotFound(
                    f"the {driver.name} JDBC driver {path} (from {source}) does not exist; "
                    f"{driver.how_to_get}"
                )
            return path.resolve()
    system = driver.system_jar if system_jar is None else system_jar
    if system.is_file():
        return system.resolve()
    raise JdbcDriverNotFound(f"no {driver.name} JDBC driver jar was found; {driver.how_to_get}")


def driver_of(location: str | os.PathLike[str]) -> Driver:
    """The driver that reads a snapshot of ``location``: SQLite's for a file, PostgreSQL's for a URL."""
    return SQLITE if file_of(location) is not None else POSTGRES
