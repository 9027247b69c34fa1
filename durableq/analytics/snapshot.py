"""A consistent state of a durableq database for Spark to read.

Spark reads a table in several partitions, each over its own JDBC
connection and at its own moment.  Against the live database, producers and
consumers writing in between would give each partition another state of the
queues.  So every partition reads one snapshot, which the database's engine
takes (``Database.export_snapshot``): of a SQLite file, a private copy made
with SQLite's online backup API; of a PostgreSQL database, the live tables as
one repeatable-read transaction exported them.  This module asks the engine
for it and adds what Spark needs besides: the JDBC driver.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .. import limits, validation
from ..engines.base import ExportedSnapshot
from ..engines.dialect import Dialect
from ..engines.location import file_of, open_database
from ..errors import InvalidParameterValue
from ..limits import DEFAULT_POSTGRES_SCHEMA
from ..types import datetime_from_ms
from . import scratch
from .driver import Driver, driver_of
from .errors import AnalyticsError


class Snapshot:
    """One committed state of a durableq database (``source``), taken at ``now_ms``: what Spark's
    JDBC reads see, whatever is written meanwhile.  Close it when done."""

    def __init__(self, exported: ExportedSnapshot, driver: Driver, folder: Path | None = None) -> None:
        self._exported = exported
        self._driver = driver
        # The run folder the copy is in (see .scratch): removed with the snapshot, or at exit.
        self._folder = None if folder is None else weakref.finalize(self, scratch.remove, folder)

    def __repr__(self) -> str:
        return f"<durableq.analytics.Snapshot of {str(self.source)!r} at {self.taken_at.isoformat()}>"

    @property
    def source(self) -> Path | str:
        """The database it is of: a file's path, or a PostgreSQL URL without its password."""
        return self._exported.source

    @property
    def path(self) -> Path | None:
        """The copy Spark reads (a file's snapshot), or None (PostgreSQL: nothing is copied)."""
        return self._exported.file

    @property
    def location(self) -> str:
        """Where the snapshot itself is, for messages when Spark cannot open it."""
        return self._exported.location

    @property
    def now_ms(self) -> int:
        return self._exported.now_ms

    @property
    def dialect(self) -> Dialect:
        """The SQL of the engine the snapshot is of (for the fragments that differ)."""
        return self._exported.dialect

    @property
    def driver_class(self) -> str:
        """The JDBC driver's class."""
        return self._driver.driver_class

    @property
    def taken_at(self) -> datetime:
        """The snapshot time as a UTC datetime: the "now" that message states are classified at."""
        return datetime_from_ms(self.now_ms)

    @property
    def name(self) -> str:
        """A short name of the source (a file's name, a database's name)."""
        if isinstance(self.source, Path):
            return self.source.name
        return urlsplit(self.source).path.rsplit("/", 1)[-1]  # a URL's database, without parameters

    @property
    def closed(self) -> bool:
        return self._exported.closed

    def close(self) -> None:
        """Let the snapshot go (remove the copy, or end the exporting transaction)."""
        self._exported.close()
        if self._folder is not None:
            self._folder()

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        """Rows of one query (in the snapshot's :attr:`dialect`) on the snapshot, in this process
        (small answers: bounds)."""
        if self.closed:
            raise AnalyticsError("this snapshot is closed; take a new one to read again")
        return self._exported.query(sql, parameters)

    def jdbc(self, sql: str) -> tuple[str, str, dict[str, str]]:
        """What a JDBC read of ``sql`` (in the snapshot's :attr:`dialect`) takes: the URL, the SQL, and
        the connection properties (the driver, and how each connection reads the snapshot)."""
        url, properties = self._exported.jdbc()
        return url, sql, {"driver": self.driver_class, **properties}


def take(
    source: str | os.PathLike[str],
    clock: Callable[[], float],
    directory: str | os.PathLike[str] | None,
    *,
    schema: str | None = None,
) -> Snapshot:
    """A snapshot of ``source`` (a SQLite file, or a PostgreSQL URL), taken by its engine.

    A file is copied into a new run folder under ``directory`` (default: the system temp folder; see
    :mod:`.scratch`, which first removes the folders of killed runs there, and
    ``durableq.engines.sqlite.copies.copy_for_readers`` for the permissions); on PostgreSQL nothing is
    copied and ``directory`` does not apply; ``schema`` is the one of durableq's tables there (checked
    as :func:`durableq.open` checks it).
    """
    if file_of(source) is not None and directory is not None and not Path(directory).is_dir():
        raise AnalyticsError(
            f"the snapshot folder {directory} does not exist or is not a folder; create it first "
            "(on a cluster: a folder every executor can read)"
        )
    if file_of(source) is not None and schema is not None:
        raise InvalidParameterValue(f"schema applies to a PostgreSQL database, not the file {source}")
    schema = (
        None if file_of(source) is not None else validation.schema_name(schema or DEFAULT_POSTGRES_SCHEMA)
    )
    database = open_database(source, "normal", limits.DEFAULT_BUSY_TIMEOUT, create=False, schema=schema)
    folder = None if file_of(source) is None else scratch.run_folder(directory)
    try:
        exported = database.export_snapshot(clock, directory if folder is None else folder)
    except BaseException:
        if folder is not None:
            scratch.remove(folder)
        raise
    finally:
        database.close()
    return Snapshot(exported, driver_of(source), folder)
