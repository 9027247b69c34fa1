"""What the operations need from an engine: a connection that runs SQL, and a database that hands
out connections inside the right kind of transaction.  :mod:`.sqlite` and :mod:`.postgres` provide
them; the operations (``durableq.ops``) see only these two protocols."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import DatabaseError
from . import watch
from .dialect import Dialect

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

#: Statement parameters: a mapping for ``:name`` placeholders, a sequence for ``?``.
Params = Mapping[str, Any] | Sequence[Any]


class Cursor(Protocol):
    """The result of one statement (the DB-API subset durableq uses)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """One connection: statements in the SQL both engines share, with the fragments that differ taken
    from :attr:`dialect`; parameters ``:name`` or ``?``."""

    @property
    def dialect(self) -> Dialect:
        """The engine's spelling of the fragments that differ (see :mod:`.dialect`)."""
        ...

    def execute(self, sql: str, parameters: Params = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Any, /) -> Cursor: ...

    @property
    def in_transaction(self) -> bool: ...


@dataclass
class GroupStats:
    """What group commit did since the database was opened (for tests and benchmarks; all zero on
    an engine without it: see ``sqlite/group.py``)."""

    alone: int = 0
    """Writes that ran in a transaction of their own."""
    batches: int = 0
    """Shared transactions (of two or more writes each)."""
    grouped: int = 0
    """Writes that ran in a shared transaction."""


class Database(Protocol):
    """One open database of either engine (see :class:`.sqlite.Database`, :class:`.postgres.Database`)."""

    #: What :func:`durableq.open` takes to open this database again (a path, or a URL).
    location: str
    #: How messages name it (a URL without its password).
    name: str
    durability: str
    busy_timeout: float
    #: The engine's spelling of the SQL fragments that differ (every connection's ``dialect``).
    dialect: Dialect

    @property
    def path(self) -> Path | None:
        """The database's file (SQLite), or None where a server keeps the data (PostgreSQL): what
        ``Broker.path`` shows (see :func:`.location.file_of`, the same fact before opening)."""
        ...

    @property
    def conn(self) -> Connection:
        """This thread's connection (autocommit: every statement alone, unless in a transaction below)."""
        ...

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction of several statements: no other write runs beside it."""
        ...

    def change(self) -> AbstractContextManager[Connection]:
        """Where a write of one atomic statement runs (or a few, in :func:`together`)."""
        ...

    def statement(self) -> AbstractContextManager[Connection]:
        """This thread's connection, for reads that need no snapshot beyond one statement."""
        ...

    def read(self) -> AbstractContextManager[Connection]:
        """A read transaction: one consistent snapshot for several statements."""
        ...

    def settled_read(self) -> AbstractContextManager[Connection]:
        """A read transaction whose snapshot is settled: every id of an event (``message_events``,
        ``audit_events``) at or below the highest it shows has committed, or never will; so a reader
        that resumes after the last id it read misses none.  Every reader that resumes after an id
        reads through it: ``Broker.message_events``, ``newest_event_id``, ``Queue.events``,
        ``Broker.audit``, the ``durableq-events`` stream, the incremental export."""
        ...

    def watcher(self) -> watch.Watcher:
        """The change watcher of this database (one per process, started on first use)."""
        ...

    @property
    def waiting(self) -> int:
        """How many writes of this process wait for the next group commit (0 where there is none)."""
        ...

    @property
    def group_stats(self) -> GroupStats: ...

    def close(self) -> None: ...

    def backup(self, dest: Path, file_mode: int) -> None:
        """Copy the database, while in use, into the new file ``dest`` (where the engine can)."""
        ...

    # -- errors and migrations (``durableq.engines.migrate``) -----------------------------

    def is_driver_error(self, exc: BaseException) -> bool:
        """Is ``exc`` an error of this engine's driver (to be :meth:`translated`)?"""
        ...

    def translated(self, exc: Exception) -> DatabaseError:
        """The durableq error for a driver error."""
        ...

    def revision(self) -> str | None:
        """The alembic revision of the database (None: empty); refuses other applications' databases."""
        ...

    def migration_lock(self) -> AbstractContextManager[None]:
        """Held while migrating: one process migrates a database at a time."""
        ...

    def prepare_migration(self) -> None:
        """Settings a database needs before its first migration (inside the migration lock)."""
        ...

    #: The table alembic keeps the revision in.
    version_table: str

    def migration_engine(self) -> Engine:
        """A SQLAlchemy engine for alembic, on connections of this database's settings."""
        ...


class Together:
    """Inside :meth:`Database.change` on SQLite, where each statement commits on its own: the
    statements of the block form one write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``, rolled
    back if the block raises).  Errors are translated by the enclosing ``change()`` as for any
    statement there.  (PostgreSQL's ``change()`` is a transaction already: see :func:`together`.)"""

    __slots__ = ("_conn",)

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self._conn.execute("COMMIT")
        elif self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


#: A block that needs no transaction of its own (one statement, or already inside one).
ALREADY: AbstractContextManager[None] = nullcontext()


def together(conn: Connection) -> AbstractContextManager[None]:
    """The statements of the block in one transaction: :class:`Together`, or :data:`ALREADY` if
    ``conn`` is in one (a group commit's savepoint, any PostgreSQL write)."""
    return ALREADY if conn.in_transaction else Together(conn)
