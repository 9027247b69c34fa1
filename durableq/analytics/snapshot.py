"""A consistent state of a durableq database for Spark to read.

Spark reads a table in several partitions, each over its own JDBC
connection and at its own moment.  Against the live database, producers and
consumers writing in between would give each partition another state of the
queues.  So every partition reads one snapshot: of a SQLite file, a private
copy made with SQLite's online backup API (:class:`FileSnapshot`); of a
PostgreSQL database, the live tables as one repeatable-read transaction
exported them (:class:`~durableq.analytics.live.PostgresSnapshot`).
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Callable, Mapping
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from .. import limits
from ..engines.dialect import SQLITE, Dialect
from ..engines.fileformat import SCHEMA_REVISION
from ..engines.files import identify
from ..engines.location import postgres_engine
from ..engines.migrate import current
from ..engines.sqlite.database import Database
from ..engines.sqlite.errors import translate
from ..engines.urls import postgres_url
from ..errors import DatabaseError, NotADurableQDatabase
from ..types import datetime_from_ms
from .driver import DRIVER_CLASS, jdbc_url
from .errors import AnalyticsError

log = logging.getLogger(__name__)

#: The busy timeout of the copy's source connection, in seconds.
_BUSY_TIMEOUT = limits.DEFAULT_BUSY_TIMEOUT
_SNAPSHOT_NAME = "snapshot.db"


class Snapshot:
    """One committed state of a durableq database (``source``), taken at ``now_ms``: what Spark's
    JDBC reads see, whatever is written meanwhile.  Close it when done."""

    #: The JDBC driver's class.
    driver_class: str
    #: The SQL of the engine the snapshot is of (for the fragments that differ).
    dialect: Dialect
    #: Where the snapshot itself is (a copy's path), for messages when Spark cannot open it.
    location: str

    def __init__(self, source: Path | str, now_ms: int) -> None:
        self.source = source
        self.now_ms = now_ms

    def __repr__(self) -> str:
        return f"<durableq.analytics.Snapshot of {str(self.source)!r} at {self.taken_at.isoformat()}>"

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
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        """Rows of one query (in the snapshot's :attr:`dialect`) on the snapshot, in this process
        (small answers: bounds)."""
        raise NotImplementedError

    def jdbc(self, sql: str) -> tuple[str, str, dict[str, str]]:
        """What a JDBC read of ``sql`` (in the snapshot's :attr:`dialect`) takes: the URL, the SQL, and
        the connection properties (the driver, and how each connection reads the
        snapshot)."""
        raise NotImplementedError


class FileSnapshot(Snapshot):
    """A copy of a durableq file, taken at ``now_ms`` (the clock after the copy ended).

    The copy's folder is removed by :meth:`close`, or at the latest when the
    object is collected or the interpreter exits.
    """

    driver_class = DRIVER_CLASS
    dialect = SQLITE

    def __init__(self, source: Path, path: Path, now_ms: int) -> None:
        super().__init__(source, now_ms)
        self.source: Path = source
        self.path = path
        self.location = str(path)
        self._remove = weakref.finalize(self, shutil.rmtree, path.parent, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return not self._remove.alive

    def close(self) -> None:
        """Remove the copy (and its folder)."""
        self._remove()

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        if self.closed:
            raise AnalyticsError("this snapshot is closed; take a new one to read again")
        try:
            with closing(sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True)) as conn:
                return conn.execute(sql, parameters or {}).fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, self.source, _BUSY_TIMEOUT) from exc

    def jdbc(self, sql: str) -> tuple[str, str, dict[str, str]]:
        # SQLITE_OPEN_READONLY: the copy is never written.
        return jdbc_url(self.path), sql, {"driver": DRIVER_CLASS, "open_mode": "1"}


def take(
    source: str | os.PathLike[str], clock: Callable[[], float], directory: str | os.PathLike[str] | None
) -> Snapshot:
    """A snapshot of ``source``: :func:`copy` of a SQLite file, or of a PostgreSQL database (a URL),
    :func:`~durableq.analytics.live.export` (``directory`` does not apply: nothing is copied)."""
    if isinstance(source, str) and postgres_url(source):
        postgres_engine(source)  # a clear error if the postgres extra is missing
        from .live import export

        return export(source, clock)
    return copy(source, clock, directory)


def copy(
    source: str | os.PathLike[str], clock: Callable[[], float], directory: str | os.PathLike[str] | None
) -> FileSnapshot:
    """Copy ``source`` into a new folder under ``directory`` (default: the system temp folder).

    Without ``directory`` the folder is private to this OS user (0700).  In a
    given ``directory`` -- storage that executors running as other OS users
    read -- the folder is :data:`~durableq.limits.SNAPSHOT_SHARED_DIR_MODE`
    (others may open the copy by its name, not list the folder), so who can
    read the copy is decided by the permissions of ``directory`` itself.  The
    copy is :data:`~durableq.limits.SNAPSHOT_FILE_MODE` (read-only) either way.
    """
    source = Path(source)
    if not source.is_file():
        # Checked first: opening a missing file through SQLite would create it.
        raise DatabaseError(f"{source} does not exist or is not a file; give the path of a durableq database")
    if directory is not None and not Path(directory).is_dir():
        raise AnalyticsError(
            f"the snapshot folder {directory} does not exist or is not a folder; create it first "
            "(on a cluster: a folder every executor can read)"
        )
    folder = Path(tempfile.mkdtemp(prefix="durableq-snapshot-", dir=directory))
    try:
        if directory is not None:
            folder.chmod(limits.SNAPSHOT_SHARED_DIR_MODE)
        path = folder / _SNAPSHOT_NAME
        _copy(source, path)
        # The clock is read after the copy: every message in it was written before "now".
        now_ms = int(clock() * 1000)
        _check(source, path)
        # Read-only: no reader can change the copy (or leave a journal beside it).
        path.chmod(limits.SNAPSHOT_FILE_MODE)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    log.debug("snapshot of %s at %s: %s", source, now_ms, path)
    return FileSnapshot(source, path, now_ms)


def _copy(source: Path, target: Path) -> None:
    uri = f"file:{quote(str(source.resolve()))}?mode=ro"
    try:
        src = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT)
        dst = sqlite3.connect(target)
        try:
            # pages=-1 copies every page in one step, inside one read transaction
            # of the source: the copy is one committed state, whatever writers do.
            src.backup(dst, pages=-1)
            # The copy inherits WAL mode; a plain journal keeps it one self-contained file.
            dst.execute("PRAGMA journal_mode = DELETE")
        finally:
            dst.close()
            src.close()
    except sqlite3.Error as exc:
        raise translate(exc, source, _BUSY_TIMEOUT) from exc


def _check(source: Path, path: Path) -> None:
    """Refuse a copy that is not a durableq file at this schema."""
    db = Database(path, durability="normal", busy_timeout=_BUSY_TIMEOUT)
    try:
        if not identify(db.conn, source):
            raise NotADurableQDatabase(f"{source} is an empty SQLite file, not a durableq database")
        revision = current(db)
        if revision != SCHEMA_REVISION:
            raise DatabaseError(
                f"{source} is at schema revision {revision!r}; this durableq reads {SCHEMA_REVISION!r}. "
                "Open it once with durableq (or `durableq db upgrade`) to migrate it"
            )
    except sqlite3.Error as exc:
        raise translate(exc, source, _BUSY_TIMEOUT) from exc
    finally:
        db.close()
