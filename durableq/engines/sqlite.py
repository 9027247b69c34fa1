"""The connector: opens the SQLite file, hands out per-thread connections,
runs transactions, and translates driver errors into durableq errors.

This is the only module that talks to ``sqlite3`` exceptions; everything
above it sees :mod:`durableq.errors`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import sqlite3
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from ..errors import (
    BrokerClosed,
    DatabaseCorrupt,
    DatabaseError,
    DatabaseFull,
    DatabaseLocked,
    DatabaseReadOnly,
    InvalidParameterValue,
)
from . import change_sources, forks, group, watch, watchers
from .files import configure_new, fsync_path, identify, use_wal
from .per_thread import PerThread, keep_inherited

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}


def translate(exc: sqlite3.Error, path: Path, busy_timeout: float) -> DatabaseError:
    """The durableq error for a driver error (raise it ``from exc``)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return DatabaseLocked(
            f"{path} stayed locked by another connection for more than {busy_timeout:g} s "
            "(the busy timeout); retry, or raise busy_timeout"
        )
    if name.startswith("SQLITE_NOTADB") or "not a database" in text:
        return DatabaseCorrupt(
            f"{path} is not an SQLite database, or its header is damaged ({text}); it was left untouched"
        )
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return DatabaseCorrupt(f"{path} is damaged ({text})")
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return DatabaseReadOnly(f"{path} cannot be written: {text}; check the file and directory permissions")
    if name.startswith("SQLITE_FULL") or "disk is full" in text or "file too large" in text:
        return DatabaseFull(f"{path}: the disk or a file size limit is full ({text}); nothing was written")
    if name.startswith("SQLITE_CANTOPEN"):
        return DatabaseError(
            f"{path} cannot be opened: {text}; check that the directory exists and is writable"
        )
    if name.startswith("SQLITE_IOERR"):
        # SQLite says only "disk I/O error"; a full disk or a file size limit are the common causes.
        cause = _no_room(path)
        if cause:
            return DatabaseFull(f"{path}: {cause}; the operation was not done (nothing was committed)")
        return DatabaseError(f"{path}: {text} ({name}); the operation was not done: check the disk")
    return DatabaseError(f"{path}: {text}")


def _unstorable(exc: UnicodeEncodeError) -> InvalidParameterValue:
    # The last line of defence: arguments are checked before they reach SQLite, but text with a
    # lone surrogate must never escape as a UnicodeEncodeError from the driver.
    return InvalidParameterValue(
        f"an argument holds text that cannot be stored (a lone surrogate): {exc.reason}"
    )


def _no_room(path: Path) -> str | None:
    """Why a write to ``path`` could fail for lack of room, if it could: no space or a size limit."""
    try:
        limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        sizes = [os.path.getsize(f) for f in (path, Path(f"{path}-wal")) if os.path.exists(f)]
        if limit != resource.RLIM_INFINITY and any(size + 65_536 >= limit for size in sizes):
            return f"the file size limit of this process ({limit} bytes, RLIMIT_FSIZE) is reached"
        space = os.statvfs(path.parent)
        if space.f_bavail * space.f_frsize < 1_048_576:
            return "the disk is full (less than 1 MiB free)"
    except OSError:
        return None
    return None


class Database:
    """One durableq file: configured connections (one per thread) and transactions."""

    def __init__(self, path: Path, *, durability: str, busy_timeout: float) -> None:
        self.path = path
        self.location = self.name = str(path)
        self.durability = durability
        self.busy_timeout = busy_timeout
        self._connections = PerThread(self._close_connection)
        self._closed = False
        # The change watcher of this file, once a long poll asked for it (see watcher()).
        wal = Path(f"{path}-wal")
        self._watcher_hold = watchers.WatcherHold(
            lambda: watchers.file_key(path),
            str(path),
            lambda: change_sources.os_source(wal),
            lambda: _VersionProbe(self.connect()),
        )
        # Group commit: writes of this process that wait behind one share the next transaction.
        # Only where a commit waits for an fsync: at "normal" there is nothing to share, and the
        # hand-offs between threads cost more than they save (bench W10).
        self._gate = group.Gate(self._begin_shared, self._commit_shared, self._translated)
        # The connection of those shared transactions: the gate's, no thread's own (not in
        # _connections), so no thread's reads run on it and no thread's end closes it.
        self._shared: sqlite3.Connection | None = None
        self._grouping = durability == "full"
        _open_databases.add(self)

    # -- connections -------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """A new connection with durableq's pragmas, in autocommit mode (we issue BEGIN ourselves)."""
        with forks.INSIDE:
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
            )
            conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[self.durability]}")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA journal_size_limit = 67108864")
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use and closed when the thread ends."""
        if self._closed:
            raise BrokerClosed(f"{self.path}: the broker is closed")
        conn = self._connections.current()
        return conn if conn is not None else self._connections.adopt(self.connect())

    def _close_connection(self, conn: sqlite3.Connection) -> None:
        try:
            with forks.INSIDE:
                conn.close()
        except sqlite3.Error:  # pragma: no cover - closing is best effort
            log.debug("closing a connection to %s failed", self.path, exc_info=True)

    def _forget_connections(self) -> None:
        # A forked child must not use its parent's SQLite connections, nor close them: it keeps
        # them unclosed (see .forks: the fork waited until no thread was inside SQLite).
        self._connections.forget()
        shared, self._shared = self._shared, None
        keep_inherited(shared)
        self._watcher_hold.forget()  # nor its watcher thread, which did not come along
        self._gate.reset()  # nor its writer threads

    def watcher(self) -> watch.Watcher:
        """The change watcher of this file (one per process and file, started on first use)."""
        return self._watcher_hold.get()

    def close(self) -> None:
        self._closed = True
        self._watcher_hold.close()
        self._connections.close_all()
        self._gate.when_free(self._close_shared)  # not under a batch still under way

    def _close_shared(self) -> None:
        conn, self._shared = self._shared, None
        if conn is not None:
            self._close_connection(conn)

    # -- transactions ------------------------------------------------------

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` takes the write lock up front, so it
        never fails half-way on a lock upgrade.  At durability "full" it is group-committed
        (see :mod:`.group`): it may share its transaction with other writes of this process,
        each in a savepoint, on the gate's connection: use only the connection it yields (not
        :attr:`conn`, which is this thread's and outside that transaction)."""
        if not self._grouping:
            return self._transaction("BEGIN IMMEDIATE")
        return _Grouped(self, transaction=True)

    def change(self) -> AbstractContextManager[sqlite3.Connection]:
        """Where a write that is one statement runs (a single ``INSERT``/``UPDATE … RETURNING``/
        ``DELETE`` is atomic and takes the write lock when it starts): alone, it commits on its
        own (autocommit); behind other writes, it joins their group like :meth:`write`."""
        return _Grouped(self, transaction=False) if self._grouping else _Statement(self)

    def statement(self) -> _Statement:
        """This thread's connection for reads that need no snapshot beyond one statement
        (autocommit; not ordered with the writes: use :meth:`change` for a write)."""
        return _Statement(self)

    @property
    def waiting(self) -> int:
        """How many writes of this process wait in line for the next group commit."""
        return self._gate.waiting

    @property
    def group_stats(self) -> group.GroupStats:
        """How many writes ran alone and how many shared a transaction (see :mod:`.group`)."""
        return self._gate.stats

    def _begin_shared(self) -> sqlite3.Connection:
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
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if conn is not None and (conn is not self._shared or conn.in_transaction):
                self._shared = None  # unusable: the next batch opens another
                self._close_connection(conn)
            raise translate(exc, self.path, self.busy_timeout) from exc
        self._shared = conn
        return conn

    def _commit_shared(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise translate(exc, self.path, self.busy_timeout) from exc
        self._watcher_hold.committed()

    def is_driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def translated(self, exc: Exception) -> DatabaseError:
        assert isinstance(exc, sqlite3.Error)
        return translate(exc, self.path, self.busy_timeout)

    # -- migrations (durableq.engines.migrate) -----------------------------------------

    def revision(self) -> str | None:
        """The alembic revision of the file (None: empty); refuses other applications' files."""
        try:
            conn = self.conn
            identify(conn, self.path)
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
            ).fetchone()
            if not has_table:
                return None
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc
        return row[0] if row else None

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

    def prepare_migration(self) -> None:
        """WAL mode, and durableq's application id in a new file."""
        conn = self.conn
        try:
            is_ours = identify(conn, self.path)
            use_wal(conn)
            if not is_ours:
                configure_new(conn)
        except sqlite3.Error as exc:
            raise translate(exc, self.path, self.busy_timeout) from exc

    #: alembic's revision table (the file is durableq's alone).
    version_table = "alembic_version"

    def migration_engine(self) -> Engine:
        """A SQLAlchemy engine for alembic on connections of this file's settings; its transactions
        take the write lock up front (pysqlite begins none for DDL)."""
        from sqlalchemy import create_engine, event
        from sqlalchemy.pool import NullPool

        engine = create_engine("sqlite://", creator=self.connect, poolclass=NullPool)

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    def _translated(self, exc: BaseException) -> BaseException:
        if isinstance(exc, sqlite3.Error):
            return translate(exc, self.path, self.busy_timeout)
        if isinstance(exc, UnicodeEncodeError):
            return _unstorable(exc)
        return exc

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: one consistent snapshot for several statements."""
        return self._transaction("BEGIN")

    def settled_read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction (see :meth:`.base.Database.settled_read`): every snapshot of the file is
        settled, as SQLite lets one writer in at a time and numbers a new row one above the highest,
        so ids commit in the order they are given and a snapshot holds all of them up to a point."""
        return self.read()

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with forks.INSIDE:
            conn = self.conn
            changes = conn.total_changes
            try:
                conn.execute(begin)
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise translate(exc, self.path, self.busy_timeout) from exc
            except UnicodeEncodeError as exc:
                _rollback(conn)
                raise _unstorable(exc) from None
            except BaseException:
                _rollback(conn)
                raise
        if conn.total_changes != changes:
            self._watcher_hold.committed()

    def backup(self, dest: Path, file_mode: int) -> None:
        """Copy the database into the new file ``dest`` with SQLite's online backup API.

        The copy is one committed state, taken in one step inside one read
        transaction of this thread's connection: it holds what is still in the
        WAL, and writers (WAL mode) go on meanwhile.  It is written under a
        temporary name in ``dest``'s folder, fsynced, and only then linked as
        ``dest``, so ``dest`` never exists half-written; an existing ``dest`` is
        refused, never replaced.
        """
        try:
            os.lstat(dest)
        except FileNotFoundError:
            pass  # as it should be; a missing folder is named below
        except (ValueError, UnicodeEncodeError) as exc:  # a NUL byte, or text no file name can hold
            raise InvalidParameterValue(
                f"path {str(dest)[:200]!r} is not a usable file name: {exc}"
            ) from None
        except OSError as exc:
            raise InvalidParameterValue(f"cannot write {dest}: {exc.strerror or exc}") from exc
        else:
            raise InvalidParameterValue(f"{dest} exists; a backup is written to a new file (remove it first)")
        folder = dest.parent
        if not folder.is_dir():
            raise InvalidParameterValue(f"cannot write {dest}: the folder {folder} does not exist")
        try:
            fd, partial = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=folder)
        except OSError as exc:
            raise DatabaseError(f"cannot write {dest}: {exc.strerror or exc}") from exc
        os.close(fd)  # a new file no connection has open: closing it drops no lock
        try:
            os.chmod(partial, file_mode)
            with forks.INSIDE:
                _copy_into(self.conn, Path(partial), dest, self.busy_timeout)
            fsync_path(partial)
            os.link(partial, dest)  # unlike rename, never replaces a file that appeared meanwhile
            fsync_path(folder)
        except FileExistsError as exc:
            raise InvalidParameterValue(
                f"{dest} appeared while the backup was written; it was left as is"
            ) from exc
        except OSError as exc:
            raise DatabaseError(f"cannot write {dest}: {exc.strerror or exc}") from exc
        finally:
            for leftover in (partial, f"{partial}-wal", f"{partial}-shm", f"{partial}-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)


_open_databases: weakref.WeakSet[Database] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for db in list(_open_databases):
        db._forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Statement:
    """Context manager of :meth:`Database.statement` (a class: it is on every hot path)."""

    __slots__ = ("_changes", "_conn", "_db")

    def __init__(self, db: Database) -> None:
        self._db = db

    def __enter__(self) -> sqlite3.Connection:
        forks.INSIDE.__enter__()
        try:
            self._conn = conn = self._db.conn
        except BaseException:
            forks.INSIDE.__exit__()
            raise
        self._changes = conn.total_changes
        return conn

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        forks.INSIDE.__exit__()  # the statement is done (its cursor read, within the block)
        # Each statement committed on its own: if any changed rows, waiters may want to look.
        watcher = self._db._watcher_hold.current
        if watcher is not None and self._conn.total_changes != self._changes:
            watcher.committed()
        if isinstance(exc, sqlite3.Error):
            raise translate(exc, self._db.path, self._db.busy_timeout) from exc
        if isinstance(exc, UnicodeEncodeError):
            raise _unstorable(exc) from None


class _Grouped:
    """Context manager of :meth:`Database.write` and :meth:`Database.change`: through the gate of
    group commit (see :mod:`.group`).  A class, not a generator: it is on every write's path."""

    __slots__ = ("_alone", "_db", "_transaction", "_turn")

    def __init__(self, db: Database, *, transaction: bool) -> None:
        self._db = db
        self._transaction = transaction
        self._alone: AbstractContextManager[sqlite3.Connection] | None = None
        self._turn: AbstractContextManager[sqlite3.Connection] | None = None

    def __enter__(self) -> sqlite3.Connection:
        forks.INSIDE.__enter__()
        try:
            return self._enter()
        except BaseException:
            forks.INSIDE.__exit__()
            raise

    def _enter(self) -> sqlite3.Connection:
        db = self._db
        member = db._gate.enter()
        if member is None:  # no other write of this process under way: exactly as without the gate
            self._alone = alone = db._transaction("BEGIN IMMEDIATE") if self._transaction else _Statement(db)
            try:
                return alone.__enter__()
            except BaseException:
                db._gate.leave()
                raise
        self._turn = turn = db._gate.turn(member)
        return turn.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            if self._alone is not None:
                try:
                    return self._alone.__exit__(exc_type, exc, tb)
                finally:
                    self._db._gate.leave()
            assert self._turn is not None
            return self._turn.__exit__(exc_type, exc, tb)
        finally:
            forks.INSIDE.__exit__()


class _VersionProbe:
    """The change watcher's probe: ``PRAGMA data_version`` on a connection of its own, which
    changes whenever any other connection, of any process, commits."""

    def __init__(self, conn: sqlite3.Connection) -> None:
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


def _copy_into(source: sqlite3.Connection, target_path: Path, dest: Path, busy_timeout: float) -> None:
    try:
        target = sqlite3.connect(target_path, timeout=busy_timeout)
        try:
            # pages=-1: every page in one step, so the copy is a single committed state
            # even while other connections write (a stepwise copy would restart or tear).
            source.backup(target, pages=-1)
        finally:
            target.close()  # in WAL mode like the source; closing checkpoints and removes its WAL
    except sqlite3.Error as exc:
        raise translate(exc, dest, busy_timeout) from exc


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # pragma: no cover - SQLite may have rolled back already
            log.debug("rollback failed", exc_info=True)
