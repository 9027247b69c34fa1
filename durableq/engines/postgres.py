"""The PostgreSQL engine: connections to a server many hosts share, transactions, notification.

The operations' statements are written once, in SQLite's spelling; :mod:`.spelling` turns each into
PostgreSQL's.

Concurrency.  SQLite lets one writer in at a time, and every rule of the operations was written
against that.  Here:

- one-statement writes (:meth:`Database.change`: a standard send, a claim, a delete, a visibility
  change) run side by side; each takes a *shared* advisory lock for its transaction, and the
  claims pass over rows another claim holds (``FOR UPDATE SKIP LOCKED``);
- writes of several statements (:meth:`Database.write`: FIFO sends and receives, batches, queue
  changes, moves) take the same lock *exclusively*: they run alone, as on SQLite, so what they read
  stays true until they commit;
- reads run without either (a read transaction is one ``REPEATABLE READ`` snapshot).

Long polls wake by ``LISTEN``/``NOTIFY``: a transaction that changed rows sends ``NOTIFY`` with its
commit, so a waiter on any host learns of it when the commit does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus

from ..errors import (
    BrokerClosed,
    DatabaseError,
    DatabaseFull,
    DatabaseLocked,
    DatabaseReadOnly,
    InvalidParameterValue,
    UnsupportedOperation,
)
from . import change_sources, watch, watchers
from .base import Cursor, Params
from .group import GroupStats
from .per_thread import PerThread
from .spelling import spell
from .urls import redacted, scrubbed

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

#: The advisory lock of durableq's writers (shared: one-statement writes; exclusive: the others).
_WRITERS = 0x6475_7261_626C  # "durabl"
#: The advisory lock of a migration (one process migrates a database at a time).
_MIGRATION = _WRITERS + 1
#: The channel of change notifications.
CHANNEL = "durableq"
#: alembic's revision table: a name of durableq's own, as the database may hold other applications'
#: tables, their own ``alembic_version`` among them.
VERSION_TABLE = "durableq_version"

_SYNCHRONOUS = {"full": "on", "normal": "off"}

#: How a settled read begins (see :meth:`Database.settled_read`), in this order on an idle
#: connection: the writers' lock taken exclusively for the session, then the transaction, whose
#: first statement (where its snapshot is taken) releases the lock.  If the second fails, the
#: connection may still hold the lock: close it.
SETTLED_BARRIER = f"SELECT pg_advisory_lock({_WRITERS})"
SETTLED_BEGIN = f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT pg_advisory_unlock({_WRITERS})"


_WRITES = ("INSERT", "UPDATE", "DELETE")


@lru_cache(maxsize=1024)
def _is_write(statement: str) -> bool:
    """Does ``statement`` change rows (so that its commit notifies)?  Once per statement text."""
    return statement.lstrip().upper().startswith(_WRITES)


def close_quietly(raw: psycopg.Connection[Any], what: str) -> None:
    """Close a driver connection; a failure to close is logged, not raised (closing is best effort)."""
    try:
        raw.close()
    except psycopg.Error:  # pragma: no cover - the server or the socket is gone already
        log.debug("closing %s failed", what, exc_info=True)


class _NumericLoader(Loader):
    """``sum()`` of integers is ``numeric`` in PostgreSQL: hand back an int, as SQLite does."""

    def load(self, data: Any) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


def translate(exc: psycopg.Error, location: str, busy_timeout: float) -> DatabaseError:
    """The durableq error for a driver error (raise it ``from exc``)."""
    where = redacted(location)
    said = scrubbed(str(exc).strip(), location)
    text = said.splitlines()[0] if said else type(exc).__name__
    if isinstance(exc, (pgerrors.LockNotAvailable, pgerrors.DeadlockDetected, pgerrors.SerializationFailure)):
        return DatabaseLocked(
            f"{where}: a lock stayed taken by another connection for more than {busy_timeout:g} s, "
            f"or two writes crossed ({text}); retry, or raise busy_timeout"
        )
    if isinstance(exc, (pgerrors.DiskFull, pgerrors.InsufficientResources)):
        return DatabaseFull(f"{where}: the server is out of room ({text}); nothing was written")
    if isinstance(exc, (pgerrors.ReadOnlySqlTransaction, pgerrors.InsufficientPrivilege)):
        return DatabaseReadOnly(f"{where} cannot be written: {text}")
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(f"{where}: cannot reach the database ({text}); the operation was not done")
    return DatabaseError(f"{where}: {text}")


def _unstorable(exc: Exception) -> InvalidParameterValue:
    return InvalidParameterValue(f"an argument holds text that cannot be stored in PostgreSQL: {exc}")


def _refused(exc: psycopg.Error) -> bool:
    """Is ``exc`` psycopg refusing an argument before sending it (text with a NUL character, which
    PostgreSQL's text cannot hold, though SQLite's can): the caller's mistake, not the database's?"""
    return isinstance(exc, psycopg.DataError) and exc.sqlstate is None


class Connection:
    """One server connection with the interface the operations use (that of ``sqlite3.Connection``):
    statements in SQLite's spelling, translated errors, and a count of changed rows."""

    __slots__ = ("_db", "changes", "raw")

    def __init__(self, raw: psycopg.Connection[Any], db: Database) -> None:
        self.raw = raw
        self._db = db
        self.changes = 0

    def execute(self, statement: str, parameters: Params = (), /) -> Cursor:
        return self._run(statement, lambda cursor, sql: cursor.execute(sql, parameters or None))

    def executemany(self, statement: str, parameters: Any, /) -> Cursor:
        return self._run(statement, lambda cursor, sql: cursor.executemany(sql, parameters))

    def _run(self, statement: str, call: Callable[[psycopg.Cursor[Any], str], object]) -> Cursor:
        """Run ``call`` on a new cursor with ``statement`` spelled for PostgreSQL; errors translated,
        changed rows counted (for the commit's NOTIFY)."""
        cursor = self.raw.cursor()
        try:
            call(cursor, spell(statement))
        except psycopg.Error as exc:
            if _refused(exc):
                raise _unstorable(exc) from None
            raise self._db.translated(exc) from exc
        except (UnicodeEncodeError, ValueError) as exc:
            raise _unstorable(exc) from None
        if cursor.rowcount > 0 and _is_write(statement):
            self.changes += cursor.rowcount
        return cursor

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    @property
    def idle(self) -> bool:
        """Open, and neither inside a transaction nor running a statement: fit to hand out."""
        return not self.raw.closed and self.raw.info.transaction_status == TransactionStatus.IDLE

    @property
    def cut_off(self) -> bool:
        """Is a statement still under way (an interrupt came while the driver waited for it)?"""
        return self.raw.info.transaction_status in (TransactionStatus.ACTIVE, TransactionStatus.UNKNOWN)

    def run(self, command: str) -> None:
        """A statement of the engine's own (no parameters; several may be joined by ``;``)."""
        try:
            self.raw.execute(command)
        except psycopg.Error as exc:
            raise self._db.translated(exc) from exc

    def rollback(self) -> None:
        if self.raw.closed or not self.in_transaction:
            return
        try:
            self.raw.execute("ROLLBACK")
        except psycopg.Error:  # the connection broke: the server rolled back
            log.debug("rollback failed", exc_info=True)

    def close(self) -> None:
        close_quietly(self.raw, "a connection")


class Database:
    """One PostgreSQL database: configured connections (one per thread) and transactions."""

    #: No file: the server keeps the data.
    path: Path | None = None

    def __init__(self, url: str, *, durability: str, busy_timeout: float) -> None:
        self.location = url
        self.name = redacted(url)
        self.durability = durability
        self.busy_timeout = busy_timeout
        self._connections = PerThread(Connection.close)
        self._closed = False
        self._watcher_hold = watchers.WatcherHold(
            lambda: ("postgresql", url), self.name, lambda: _ListenSource(self), lambda: _Probe(self)
        )
        _open_databases.add(self)

    def __repr__(self) -> str:
        return f"<postgres.Database {self.name!r}>"

    # -- connections -----------------------------------------------------------------------

    def raw_connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new driver connection with durableq's settings."""
        url = self.location.replace("postgresql+psycopg://", "postgresql://", 1)
        try:
            raw = psycopg.connect(
                url,
                autocommit=autocommit,
                cursor_factory=psycopg.Cursor,
                connect_timeout=max(1, round(self.busy_timeout)),
                application_name="durableq",
            )
            _raw_connections.add(raw)
            raw.adapters.register_loader("numeric", _NumericLoader)
            raw.execute(
                f"SET synchronous_commit = {_SYNCHRONOUS[self.durability]}; "
                f"SET lock_timeout = {max(1, round(self.busy_timeout * 1000))}; "
                "SET TIME ZONE 'UTC'"
            )
        except psycopg.Error as exc:
            raise translate(exc, self.location, self.busy_timeout) from exc
        return raw

    def connect(self) -> Connection:
        return Connection(self.raw_connect(), self)

    @property
    def conn(self) -> Connection:
        """This thread's connection, opened on first use (and again if the server dropped it, or a
        statement of it was cut off half way: its state is unknown)."""
        if self._closed:
            raise BrokerClosed(f"{self.name}: the broker is closed")
        conn = self._connections.current()
        if conn is not None and not (conn.raw.closed or conn.raw.broken or conn.cut_off):
            return conn
        if conn is not None:
            self._connections.release(conn)
        return self._connections.adopt(self.connect())

    def _forget_connections(self) -> None:
        # A forked child must not use its parent's sockets: drop them unclosed (see below).
        self._connections.forget()
        self._watcher_hold.forget()

    def is_driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)

    def translated(self, exc: Exception) -> DatabaseError:
        assert isinstance(exc, psycopg.Error)
        return translate(exc, self.location, self.busy_timeout)

    # -- transactions ----------------------------------------------------------------------
    #
    # A connection is handed out idle, and given back idle or closed: every transaction runs
    # through _transaction, whose one except clause (_restore) covers every step that can fail
    # (the lock of its BEGIN timing out, a statement, NOTIFY or COMMIT, an interrupt, a connection
    # the server dropped).  A connection left inside an aborted transaction would fail every later
    # call of its thread, and hold its locks meanwhile.

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction that runs alone: the writers' lock, exclusively (as SQLite's
        ``BEGIN IMMEDIATE``)."""
        return self._transaction(f"BEGIN; SELECT pg_advisory_xact_lock({_WRITERS})")

    def change(self) -> AbstractContextManager[Connection]:
        """A write of one statement (or a few, in ``together``): the writers' lock, shared."""
        return self._transaction(f"BEGIN; SELECT pg_advisory_xact_lock_shared({_WRITERS})")

    def read(self) -> AbstractContextManager[Connection]:
        """A read transaction: one ``REPEATABLE READ`` snapshot."""
        return self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def settled_read(self) -> AbstractContextManager[Connection]:
        """A read transaction whose snapshot is *settled*: taken while no write was under way, so
        every event id at or below the highest it shows has committed, or never will.

        Why it is needed: ids come from a sequence as rows are written, and one-statement writes
        commit side by side (the writers' lock shared), so id N + 1 may commit before N.  A plain
        snapshot between the two commits shows N + 1 without N, and a reader that resumes after
        N + 1 never sees N.

        Why this is correct: every durableq write holds the writers' lock (shared or exclusive)
        from its ``BEGIN`` to its end, so a transaction that took an id holds it until it has
        committed or rolled back.  ``pg_advisory_lock`` (exclusive) waits until no transaction
        holds it and keeps new ones out; PostgreSQL makes a commit visible to new snapshots before
        it releases the transaction's locks (``ProcArrayEndTransaction`` comes before the locks'
        release in ``CommitTransaction``).  A ``REPEATABLE READ`` transaction takes its snapshot
        at the start of its first statement, here the one that releases the lock: at that moment
        every id given so far belongs to a transaction that has ended (it is in the snapshot, or
        was rolled back), and every id given later is higher.

        The cost falls on readers: a settled read waits for the writes under way (as a write that
        runs alone does), and writes that start meanwhile wait for it; the lock is released as
        soon as the snapshot is taken, and no write pays anything when nobody reads."""
        return self._transaction(SETTLED_BEGIN, barrier=SETTLED_BARRIER)

    @contextmanager
    def statement(self) -> Iterator[Connection]:
        """This thread's connection for reads of one statement (autocommit)."""
        yield self.conn

    @contextmanager
    def _transaction(self, begin: str, *, barrier: str | None = None) -> Iterator[Connection]:
        """``begin`` … ``COMMIT`` (with ``NOTIFY`` if rows changed) on this thread's connection.
        ``barrier``: a statement before ``begin`` that takes a session lock ``begin`` releases."""
        conn = self.conn
        changes = conn.changes
        # From the barrier's start to begin's end, the session lock may be held (even by a barrier
        # that seemed to fail: an interrupt may cut it off after the server granted it).
        holding = barrier is not None
        try:
            if barrier is not None:
                conn.run(barrier)
            conn.run(begin)
            holding = False
            yield conn
            changed = conn.changes != changes
            conn.run(f"NOTIFY {CHANNEL}; COMMIT" if changed else "COMMIT")
        except BaseException:
            self._restore(conn, holding=holding)
            raise
        if changed:
            self._watcher_hold.committed()

    def _restore(self, conn: Connection, *, holding: bool) -> None:
        """After a transaction failed at any step: roll ``conn`` back to idle, or, where that cannot
        be made sure of (broken, a statement cut off half way, a session lock it may still hold),
        close it; the thread's next call then opens a new one."""
        if not holding:
            conn.rollback()
            if conn.idle:
                return
        self._connections.release(conn)

    @property
    def waiting(self) -> int:
        return 0  # no group commit: PostgreSQL commits concurrent transactions side by side

    @property
    def group_stats(self) -> GroupStats:
        return GroupStats()

    # -- notification ----------------------------------------------------------------------

    def watcher(self) -> watch.Watcher:
        """The change watcher of this database (one per process and database)."""
        return self._watcher_hold.get()

    def close(self) -> None:
        self._closed = True
        self._watcher_hold.close()
        self._connections.close_all()

    # -- migrations ------------------------------------------------------------------------

    version_table = VERSION_TABLE

    def migration_engine(self) -> Engine:
        """A SQLAlchemy engine for alembic, on connections of this database's settings."""
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        return create_engine(
            "postgresql+psycopg://", creator=lambda: self.raw_connect(autocommit=False), poolclass=NullPool
        )

    def revision(self) -> str | None:
        """The alembic revision of the database (None: durableq never migrated it)."""
        with self.statement() as conn:
            (table,) = conn.execute(f"SELECT to_regclass('{VERSION_TABLE}')").fetchone()
            if table is None:
                return None
            row = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
        return row[0] if row else None

    @contextmanager
    def migration_lock(self) -> Iterator[None]:
        """Only one process migrates the database at a time (a session advisory lock)."""
        conn = self.connect()
        try:
            conn.run(f"SET lock_timeout = {max(1, round(self.busy_timeout * 1000))}")
            conn.run(f"SELECT pg_advisory_lock({_MIGRATION})")
            yield
        finally:
            conn.close()  # ends the session, and its lock

    def prepare_migration(self) -> None:
        """Nothing to prepare: a PostgreSQL database needs no file settings."""

    def backup(self, dest: Path, file_mode: int) -> None:
        raise UnsupportedOperation(
            f"{self.name}: backup() copies a SQLite file; back a PostgreSQL database up with pg_dump "
            "or the server's own backups"
        )


_open_databases: weakref.WeakSet[Database] = weakref.WeakSet()
#: Every driver connection this process opened (the watcher's too), for the fork handler below.
_raw_connections: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
#: A forked child's copies of its parent's connections: kept, never closed (see below).
_inherited: list[psycopg.Connection[Any]] = []


def _after_fork_in_child() -> None:
    # A forked child shares its parent's sockets.  Closing its copy of a connection (as collecting
    # it would) sends the server a Terminate message and ends the PARENT's session.  So the child
    # points each copied socket at /dev/null and keeps the objects: whatever libpq writes on them
    # later goes nowhere, and the parent's connections live on.
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for raw in list(_raw_connections):
            with contextlib.suppress(psycopg.Error, OSError):
                if not raw.closed:
                    os.dup2(null, raw.fileno())
            _inherited.append(raw)
    finally:
        os.close(null)
    for db in list(_open_databases):
        db._forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _ListenSource:
    """The watcher's change source: a connection that ``LISTEN``s; readable at every ``NOTIFY``."""

    interval = 1.0

    def __init__(self, db: Database) -> None:
        self._raw = db.raw_connect()
        self._raw.execute(f"LISTEN {CHANNEL}")
        self.fileno: int | None = self._raw.fileno()

    def read(self) -> change_sources.News:
        if self.fileno is None:
            return change_sources.News.NOTHING  # broken earlier: the watcher's periodic probe stands in
        pgconn = self._raw.pgconn
        try:
            pgconn.consume_input()
        except psycopg.Error:
            # The server went away: stop listening (waiters fall back on the watcher's periodic
            # probe and on their deadlines) rather than read a dead socket in a loop.
            log.warning("the change notification connection broke; long polls fall back on polling")
            self.fileno = None
            return change_sources.News.MAYBE
        news = change_sources.News.NOTHING
        while pgconn.notifies() is not None:
            news = change_sources.News.COMMITTED
        return news

    def close(self) -> None:
        close_quietly(self._raw, "the listener")


class _Probe:
    """The watcher's probe: the next transaction id, which moves whenever anything is written."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._raw = db.raw_connect()

    def __call__(self) -> int:
        if self._raw.closed or self._raw.broken:
            self._raw = self._db.raw_connect()
        row = self._raw.execute("SELECT CAST(pg_snapshot_xmax(pg_current_snapshot()) AS text)").fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        close_quietly(self._raw, "the probe")
