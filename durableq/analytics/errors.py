"""The errors of the analytics extra.

Kept free of pyspark imports, so the package can raise :class:`SparkExtraMissing`
before it touches Spark at all.
"""

from __future__ import annotations

from ..errors import DurableQError

#: What to run when the optional dependencies are missing.
INSTALL_HINT = "pip install 'durableq[spark]'"


class SparkExtraMissing(ImportError):
    """pyspark (or matplotlib, for plots) is not installed: the ``durableq[spark]`` extra is needed."""

    def __init__(self, module: str) -> None:
        super().__init__(
            f"durableq.analytics needs {module}, which is not installed; install the Spark extra "
            f"with: {INSTALL_HINT} (Spark also needs Java 17+ and the SQLite JDBC driver)",
            name=module,
        )


class AnalyticsError(DurableQError):
    """The analytics reader cannot do what was asked."""


class JdbcDriverNotFound(AnalyticsError):
    """No SQLite JDBC driver jar was found (or the Spark session cannot load it)."""
