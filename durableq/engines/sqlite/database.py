"""The SQLite engine's database: one durableq file, its connections (one per thread, with durableq's
pragmas), its kinds of transaction (see :mod:`.transactions`), group commit (:mod:`..group`) and the
change watcher's hold; what migrations need of it is in :mod:`.migrations`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import BrokerClosed, DatabaseError
from .. import change_sources, forks, watch, watchers
from ..base import GroupStats
from ..dialect import SQLITE
from ..own import OwnTransactions
from ..per_thread import PerThread, keep_inherited
from . import group
from .connection import BEGIN_WRITE, SqliteConnection
from .copies import FileCopy, backup, copy_for_readers
from .errors import translate, unstorable
from .migrations import FileMigrations
from .transactions import Grouped, Statement, rollback, transaction

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}


class Database(FileMigrations):
    """One durableq file: configured connections (one per thread) and transactions."""

    dialect = SQLITE
    #: One writer at a time: a change runs alone (see :attr:`.base.Database.concurrent_changes`).
    concurrent_changes = False

    def __init__(self, path: Path, *, durability: str, busy_timeout: float) -> None:
        self.path = path
        self.location = self.name = str(path)
        self.durability = durability
        self.busy_timeout = busy_timeout
        self.own = OwnTransactions()  # the threads inside own_transaction(): refused elsewhere
        self._connections = PerThread(self._close_connection)
        self._closed = False
        # The change watcher of this file, once a long poll asked for it (see watcher()).
        wal = Path(f"{path}-wal")
        self.watcher_hold = watchers.WatcherHold(
            lambda: watchers.file_key(path),
            str(path),
            lambda: change_sources.os_source(wal),
            lambda: _VersionProbe(self.connect()),
        )
        # Group commit: writes of this process that wait behind one share the next transaction.
        # Only where a commit waits for an fsync: at "normal" there is nothing to share, and the
        # hand-offs between threads cost more than they save (bench W10).
        self.gate = group.Gate(self._begin_shared, self._commit_shared, self._translated)
        # The connection of those shared transactions: the gate's, no thread's own (not in
        # _connections), so no thread's reads run on it and no thread's end closes it.
        self._shared: SqliteConnection | None = None
        self._grouping = durability == "full"
        _open_databases.add(self)

    # -- connections -------------------------------------------------------

    def connect(self) -> SqliteConnection:
        """A new connection with durableq's pragmas, in autocommit mode (we issue BEGIN ourselves)."""
        with forks.INSIDE:
            return self._connect()

    def _connect(self) -> SqliteConnection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
                factory=SqliteConnection,
            )
            conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[self.durability]}")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA journal_size_limit = 67108864")
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc
        return conn

    @property
    def conn(self) -> SqliteConnection:
        """This thread's connection, opened on first use and closed when the thread ends."""
        if self._closed:
            self._connections.close_mine()  # left to this thread by close(), if it was busy then
            raise BrokerClosed(f"{self.path}: the broker is closed")
        conn = self._connections.current()
        return conn if conn is not None else self._connections.adopt(self.connect())

    def _close_connection(self, conn: SqliteConnection) -> None:
        try:
            with forks.INSIDE:
                conn.close()
        except sqlite3.Error:  # pragma: no cover - closing is best effort
            log.debug("closing a connection to %s failed", self.path, exc_info=True)

    def _forget_connections(self) -> None:
        # A forked child must not use its parent's SQLite connections, and it must close them: the
        # copies share SQLite's table of this process's file locks with the child's own connections,
        # which, while a copy stays open, take no lock of their own on the file: another process would
        # then checkpoint and delete the WAL under the child's commits.  The fork waited until no
        # thread was inside SQLite (..forks), so every copy is idle and closing it touches nothing of
        # the parent's.  Forked from inside a transaction, the child may not touch them: kept.
        copies = [*self._connections.forget(), self._shared]
        self._shared = None
        if forks.forked_between_calls:
            for copy in copies:
                if copy is not None:
                    self._close_connection(copy)
        else:
            keep_inherited(copies)
        self.watcher_hold.forget()  # nor its watcher thread, which did not come along
        self.gate.reset()  # nor its writer threads

    def committed_elsewhere(self) -> None:
        """A transaction this engine did not commit changed rows and committed (the application's on
        its own connection): the waiters of this process look now."""
        self.watcher_hold.committed()

    def watcher(self) -> watch.Watcher:
        """The change watcher of this file (one per process and file, started on first use)."""
        return self.watcher_hold.get()

    def close(self) -> None:
        self._closed = True
        self.watcher_hold.close()
        self._connections.close_all(busy=forks.inside)
        self.gate.when_free(self._close_shared)  # not under a batch still under way

    def _close_shared(self) -> None:
        conn, self._shared = self._shared, None
        if conn is not None:
            self._close_connection(conn)

    # -- transactions ------------------------------------------------------

    def write(self) -> AbstractContextManager[SqliteConnection]:
        """A write transaction: ``BEGIN IMMEDIATE`` takes the write lock up front, so it
        never fails half-way on a lock upgrade.  At durability "full" it is group-committed
        (see :mod:`.group`): it may share its transaction with other writes of this process,
        each in a savepoint, on the gate's connection: use only the connection it yields (not
        :attr:`conn`, which is this thread's and outside that transaction)."""
        self.own.refuse_outside(self.name)
        if not self._grouping:
            return transaction(self, BEGIN_WRITE)
        return Grouped(self, transaction=True)

    def change(self) -> AbstractContextManager[SqliteConnection]:
        """Where a write that is one statement runs (a single ``INSERT``/``UPDATE … RETURNING``/
        ``DELETE`` is atomic and takes the write lock when it starts): alone, it commits on its
        own (autocommit); behind other writes, it joins their group like :meth:`write`."""
        self.own.refuse_outside(self.name)
        return Grouped(self, transaction=False) if self._grouping else Statement(self)

    #: Nothing to send: a commit of any connection, of any process, reaches the change watcher by the
    #: file (its WAL and ``data_version``).
    joined_notice: str | None = None

    def joined_lock(self, alone: bool) -> str | None:
        """Nothing: the write lock is the transaction's (taken up front by ``BEGIN IMMEDIATE``, or by
        its first write), and SQLite lets one writer in at a time."""
        return None

    @contextmanager
    def own_transaction(self) -> Iterator[SqliteConnection]:
        """The application's write transaction (``Broker.transaction()``, see
        :meth:`.base.Database.own_transaction`): the gate held alone for the whole block, so no batch
        of group commit ever holds the application's work nor waits inside it, and ``BEGIN
        IMMEDIATE`` on the gate's connection (no thread's own: this thread's other calls stay
        outside).  Inside :data:`.forks.INSIDE` all along: a fork waits for the block's end."""
        with forks.INSIDE, self.own.held(self.name):
            self.gate.enter_alone()
            try:
                conn = self._begin_shared()
                try:
                    yield conn
                except BaseException:
                    rollback(conn)
                    raise
                self._commit_shared(conn)
            finally:
                self.gate.leave()

    def statement(self) -> Statement:
        """This thread's connection for reads that need no snapshot beyond one statement
        (autocommit; not ordered with the writes: use :meth:`change` for a write)."""
        return Statement(self)

    @property
    def waiting(self) -> int:
        """How many writes of this process wait in line for the next group commit."""
        return self.gate.waiting

    @property
    def group_stats(self) -> GroupStats:
        """How many writes ran alone and how many shared a transaction (see :mod:`.group`)."""
        return self.gate.stats

    def _begin_shared(self) -> SqliteConnection:
        """A shared transaction begun on the gate's connection (opened on first use), for a batch
        of group commit; only the gate calls this, while it holds the batch."""
        if self._closed:
            raise BrokerClosed(f"{self.path}: the broker is closed")
        conn = self._shared
        try:
            if conn is None:
                conn = self.connect()
            elif conn.in_transaction:  # left open by a failure that could not roll it back
                conn.execute("ROLLBACK")
            conn.execute(BEGIN_WRITE)
        except sqlite3.Error as exc:
            if conn is not None and (conn is not self._shared or conn.in_transaction):
                self._shared = None  # unusable: the next batch opens another
                self._close_connection(conn)
            raise translate(exc, self.path, self.busy_timeout) from exc
        self._shared = conn
        return conn

    def _commit_shared(self, conn: SqliteConnection) -> None:
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            rollback(conn)
            raise translate(exc, self.path, self.busy_timeout) from exc
        self.watcher_hold.committed()

    def is_driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def translated(self, exc: Exception) -> DatabaseError:
        assert isinstance(exc, sqlite3.Error)
        return translate(exc, self.path, self.busy_timeout)

    # -- migrations: the rest in .migrations ------------------------------------------

    def _new_at_head(self, path: Path) -> None:
        """A new durableq file at ``path``, migrated to head (see :mod:`.shared`)."""
        from .. import migrate

        database = Database(path, durability="normal", busy_timeout=self.busy_timeout)
        try:
            migrate.upgrade(database)
        finally:
            database.close()

    def application_statement(self, conn: object) -> AbstractContextManager[None]:
        return nullcontext()  # a file has one namespace: nothing to set

    @contextmanager
    def on_foreign_connection(self, conn: Any) -> Iterator[Any]:
        """Where durableq's statements run on a connection it did not open (the application's): on
        SQLite nothing to set, as a file has one namespace and durableq's names are its own."""
        yield conn

    def backup(self, dest: Path, file_mode: int) -> None:
        """Copy the database into the new file ``dest`` with SQLite's online backup API (see
        :func:`.copies.backup`)."""
        backup(lambda: self.conn, dest, file_mode, self.busy_timeout)

    def export_snapshot(
        self, clock: Callable[[], float], directory: str | os.PathLike[str] | None
    ) -> FileCopy:
        """A copy of the file for readers (see :func:`.copies.copy_for_readers`)."""
        return copy_for_readers(self.path, clock, directory, self.busy_timeout)

    def _translated(self, exc: BaseException) -> BaseException:
        if isinstance(exc, sqlite3.Error):
            return translate(exc, self.path, self.busy_timeout)
        if isinstance(exc, UnicodeEncodeError):
            return unstorable(exc)
        return exc

    def read(self) -> AbstractContextManager[SqliteConnection]:
        """A read transaction: one consistent snapshot for several statements."""
        return transaction(self, "BEGIN")

    def settled_read(self) -> AbstractContextManager[SqliteConnection]:
        """A read transaction (see :meth:`.base.Database.settled_read`): every snapshot of the file is
        settled, as SQLite lets one writer in at a time and numbers a new row one above the highest,
        so ids commit in the order they are given and a snapshot holds all of them up to a point."""
        return self.read()


_open_databases: weakref.WeakSet[Database] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for db in list(_open_databases):
        db._forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _VersionProbe:
    """The change watcher's probe: ``PRAGMA data_version`` on a connection of its own, which
    changes whenever any other connection, of any process, commits."""

    def __init__(self, conn: SqliteConnection) -> None:
        self._conn = conn

    def __call__(self) -> int:
        with forks.INSIDE:
            version: int = self._conn.execute("PRAGMA data_version").fetchone()[0]
        return version

    def close(self) -> None:
        try:
            with forks.INSIDE:
                self._conn.close()
        except sqlite3.Error:  # pragma: no cover - closing is best effort
            log.debug("closing the change probe failed", exc_info=True)
