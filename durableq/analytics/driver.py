"""Finding the SQLite JDBC driver jar that Spark reads the snapshot with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .errors import JdbcDriverNotFound

#: The environment variable naming the driver jar.
JAR_VARIABLE = "DURABLEQ_SQLITE_JDBC_JAR"
#: Where Debian and Ubuntu's libxerial-sqlite-jdbc-java package puts the driver.
SYSTEM_JAR = Path("/usr/share/java/sqlite-jdbc.jar")
#: The driver class inside the jar.
DRIVER_CLASS = "org.sqlite.JDBC"

HOW_TO_GET = (
    "install it with `apt-get install libxerial-sqlite-jdbc-java` (it lands in "
    f"{SYSTEM_JAR}), or download the jar of org.xerial:sqlite-jdbc from Maven Central "
    f"(https://repo1.maven.org/maven2/org/xerial/sqlite-jdbc/) and set {JAR_VARIABLE} "
    "to its path (or pass jdbc_jar=..., `--jar` on the command line)"
)


def find_jdbc_jar(
    jdbc_jar: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    system_jar: Path = SYSTEM_JAR,
) -> Path:
    """The driver jar: ``jdbc_jar`` if given, else ``$DURABLEQ_SQLITE_JDBC_JAR``, else the system jar.

    This is the one place the analytics entry point reads the environment
    (``environ`` defaults to ``os.environ``).  A jar that is named but missing
    is an error rather than a reason to look further: a typo should not
    silently pick another driver.
    """
    env = os.environ if environ is None else environ
    for source, named in (("jdbc_jar", jdbc_jar), (JAR_VARIABLE, env.get(JAR_VARIABLE) or None)):
        if named is not None:
            path = Path(named)
            if not path.is_file():
                raise JdbcDriverNotFound(
                    f"the SQLite JDBC driver {path} (from {source}) does not exist; {HOW_TO_GET}"
                )
            return path.resolve()
    if system_jar.is_file():
        return system_jar.resolve()
    raise JdbcDriverNotFound(f"no SQLite JDBC driver jar was found; {HOW_TO_GET}")


def jdbc_url(database: Path) -> str:
    """The JDBC URL of an SQLite file."""
    return f"jdbc:sqlite:{database}"
