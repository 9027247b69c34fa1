"""What migrations (:mod:`durableq.engines.migrate`) need of a durableq file: its revision, the lock
that lets one process migrate it, the file's own preparation, and alembic's engine."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from ...errors import DatabaseLocked
from ..fileformat import VERSION_TABLE
from ..files import adopt_legacy_version, after_downgrade, configure_new, identify, read_revision, use_wal
from . import shared
from .connection import BEGIN_WRITE, SqliteConnection
from .errors import translate

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


class FileMigrations:
    """The migration methods of :class:`.database.Database` (a mixin: the file and its connections
    are the database's)."""

    path: Path
    busy_timeout: float

    @property
    def conn(self) -> SqliteConnection:
        raise NotImplementedError

    def connect(self) -> SqliteConnection:
        raise NotImplementedError

    def _new_at_head(self, path: Path) -> None:
        raise NotImplementedError

    def revision(self) -> str | None:
        """The alembic revision of the file (None: empty); refuses other applications' files."""
        try:
            conn = self.conn
            identify(conn, self.path)
            return read_revision(conn)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc

    @contextmanager
    def migration_lock(self) -> Iterator[None]:
        """A lock file beside the database: one process migrates it (and creates a new one) at a time."""
        lock = FileLock(f"{self.path}.lock", mode=0o600)
        try:
            with lock.acquire(timeout=self.busy_timeout):
                yield
        except Timeout as exc:
            raise DatabaseLocked(
                f"another process held the migration lock {lock.lock_file} "
                f"for more than {self.busy_timeout:g} s"
            ) from exc

    def prepare_migration(self, target: str = "head") -> None:
        """WAL mode, durableq's application id in a new file, the revision of a file before 0009
        where alembic now keeps it (see :func:`..files.adopt_legacy_version`), and in a file of an
        application's, durableq's tables made at once at head (see :mod:`.shared`)."""
        conn = self.conn
        try:
            fresh = not identify(conn, self.path)
            if fresh:
                configure_new(conn)
            use_wal(conn)
            adopt_legacy_version(conn)
            if fresh and target == "head" and shared.holds_other_objects(conn):
                shared.make_at_head(conn, self._new_at_head)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc

    def drop_all(self) -> bool:
        """In a file shared with an application (see :mod:`.shared`): every table of durableq's dropped
        at once, with its indexes and triggers (the revisions before 0009 would take the application's
        names on the way down); in a file of durableq's alone, False: the revisions walk down."""
        try:
            return shared.drop_all(self.conn)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc

    def after_downgrade(self, revision: str | None) -> None:
        """See :func:`..files.after_downgrade`."""
        try:
            after_downgrade(self.conn, revision)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc

    #: alembic's revision table (the file may hold an application's tables).
    version_table = VERSION_TABLE

    def migration_engine(self) -> Engine:
        """A SQLAlchemy engine for alembic on connections of this file's settings; its transactions
        take the write lock up front (pysqlite begins none for DDL)."""
        from sqlalchemy import create_engine, event
        from sqlalchemy.pool import NullPool

        engine = create_engine("sqlite://", creator=self.connect, poolclass=NullPool)

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql(BEGIN_WRITE)

        return engine
