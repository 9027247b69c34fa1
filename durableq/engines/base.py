"""The engine contract: what the operations need from an engine, a connection that runs SQL and a
database that hands out connections inside the right kind of transaction.  :mod:`.sqlite` and
:mod:`.postgres` provide them; the operations (``durableq.ops``) see only these protocols.  Behaviour
that differs between the engines is a named member here, with its contract (never a check of which
engine it is); ``tests/test_engine_contract.py`` pins each on every engine."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
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

    def one_write(self) -> AbstractContextManager[None]:
        """Inside :meth:`Database.change`: the statements of the block commit as one write, or, if
        the block raises, none of them (a standard send and its history event).  Where the connection
        is in autocommit (SQLite's change run alone, each statement committing on its own) it begins
        the engine's write transaction for the block; where a transaction is open already (a group
        commit's savepoint, a :meth:`Database.write`, any change on PostgreSQL) the block is part of
        it and nothing is added.  Errors are translated by the enclosing ``change()``."""
        ...


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


class ExportedSnapshot(Protocol):
    """One settled, committed state of a whole database, held still for readers outside durableq
    (Spark's JDBC reads: several connections, on any host, each at its own moment) until
    :meth:`close`: a private copy of a file, or a server's transaction snapshot exported by id.
    Settled as :meth:`Database.settled_read` is: no event at or below its highest id is still to
    commit."""

    #: Where the snapshot itself is, for messages (a copy's path; the URL and the snapshot's id).
    location: str
    #: The clock when the snapshot was taken, read after it was: every row in it was written before.
    now_ms: int
    #: The SQL of the engine (for the fragments that differ).
    dialect: Dialect

    @property
    def source(self) -> Path | str:
        """The database it is of: a file's path, or a URL without its password."""
        ...

    @property
    def file(self) -> Path | None:
        """The copy's file, or None where nothing is copied (readers connect to the server)."""
        ...

    @property
    def closed(self) -> bool: ...

    def close(self) -> None:
        """Let the snapshot go (remove the copy; end the exporting transaction)."""
        ...

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        """The rows of one query (``:name`` parameters) on the snapshot, in this process."""
        ...

    def jdbc(self) -> tuple[str, dict[str, str]]:
        """How a JDBC connection reads the snapshot: its URL, and its connection properties (how each
        connection opens the snapshot: read only; in the exported transaction), the driver's class
        aside."""
        ...


class Database(Protocol):
    """One open database of either engine (:class:`.sqlite.database.Database`,
    :class:`.postgres.database.Database`)."""

    #: What :func:`durableq.open` takes to open this database again (a path, or a URL).
    location: str
    #: How messages name it (a URL without its password).
    name: str
    durability: str
    busy_timeout: float
    #: The engine's spelling of the SQL fragments that differ (every connection's ``dialect``).
    dialect: Dialect
    #: Do writes of :meth:`change` run side by side?  False (SQLite): one writer at a time, so a
    #: change runs alone, sees every change committed before it, and an id it takes commits before
    #: any later change's.  True (PostgreSQL): changes run concurrently with each other (never with a
    #: :meth:`write`): what a change reads in one statement may be changed by another before it
    #: commits, claims pass over the rows others are claiming (``dialect.skip_locked``), and ids may
    #: commit out of the order they were taken in (readers of events use :meth:`settled_read`).
    concurrent_changes: bool

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
        """The transaction of a write of several statements that read and write (a FIFO send or
        receive, a batch, a queue's change, a move): it runs alone, no other write beside it, so what
        it reads stays true until it commits (SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's writers'
        lock taken exclusively)."""
        ...

    def change(self) -> AbstractContextManager[Connection]:
        """Where a write of one atomic statement runs (a standard send, a claim, a delete, a
        visibility change), or a few that must commit as one (:meth:`Connection.one_write`).  Changes
        may run side by side: see :attr:`concurrent_changes`."""
        ...

    @property
    def joined_notice(self) -> str | None:
        """A statement an operation inside a transaction it did not begin sends after it, which the
        commit delivers to the change watchers of every process (PostgreSQL's ``NOTIFY``); None where
        the commit itself reaches them (SQLite's file)."""
        ...

    def joined_lock(self, alone: bool) -> str | None:
        """What an operation inside a transaction it did not begin (the application's) runs first,
        to hold what :meth:`write` (``alone``) or :meth:`change` would hold, until that transaction
        ends; None where the transaction's own write lock is enough (SQLite)."""
        ...

    def own_transaction(self) -> AbstractContextManager[Connection]:
        """The application's write transaction on durableq's side (``Broker.transaction()``): a
        connection no other call of this process uses, in a transaction that is never shared with
        other writes (never part of a group commit) and runs as long as the application's block;
        ``COMMIT`` at the block's end (the change watcher told, at the database's durability), rolled
        back if the block raises.  Nothing is locked up front beyond what a write needs on the
        engine (SQLite's write lock); the operations inside take what they need as they go."""
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

    def committed_elsewhere(self) -> None:
        """A transaction the engine did not commit (the application's, on its own connection)
        committed changes: tell this process's change watcher, as the engine's own commits do."""
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

    def export_snapshot(
        self, clock: Callable[[], float], directory: str | os.PathLike[str] | None
    ) -> ExportedSnapshot:
        """A settled snapshot of the database for readers outside durableq (the analytics), checked to
        be durableq's at the schema revision this code reads.  ``clock``: read once the snapshot is
        taken.  ``directory``: where a copy goes (None: a private folder in the temp folder), for
        an engine that copies."""
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

    def prepare_migration(self, target: str = "head") -> None:
        """Settings a database needs before its first migration, and a database of a revision before
        0009 made ready for alembic (inside the migration lock, before an upgrade to ``target``)."""
        ...

    def after_downgrade(self, revision: str | None) -> None:
        """After a downgrade to ``revision`` (inside the migration lock): below 0009, the database put
        back where the durableq of that revision finds it; at base, durableq's version table gone."""
        ...

    def drop_all(self) -> bool:
        """Remove every table of durableq's at once (a downgrade to base), where the engine does so
        rather than walk the revisions down (see the SQLite engine); False: walk them."""
        ...

    def application_statement(self, conn: Connection) -> AbstractContextManager[None]:
        """Around one statement of the application's (``Transaction.execute``) on ``conn``, a connection
        that names durableq's tables: names resolved as the application's own connections resolve
        them, so what the statement creates lands where the application's would (PostgreSQL:
        durableq's schema out of the ``search_path`` for the statement; SQLite: nothing to do)."""
        ...

    def on_foreign_connection(self, conn: Any) -> AbstractContextManager[Any]:
        """For the block, ``conn``, a driver connection of the application's to this database, names
        durableq's tables as durableq's own connections do (on PostgreSQL: durableq's schema first in
        its ``search_path``, for the transaction under way, and the application's path back after
        the block).  Yields ``conn``."""
        ...

    #: The table alembic keeps the revision in.
    version_table: str

    def migration_engine(self) -> Engine:
        """A SQLAlchemy engine for alembic, on connections of this database's settings."""
        ...
