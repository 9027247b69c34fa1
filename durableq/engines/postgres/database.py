"""The PostgreSQL engine's database: connections to a server many hosts share (one per thread), its
kinds of transaction (the writers' lock: see :mod:`.locks`), change notification (:mod:`.notify`),
and what migrations need of it.

Long polls wake by ``LISTEN``/``NOTIFY``: a transaction that changed rows sends ``NOTIFY`` with its
commit while a long poll listens (see :mod:`.locks`), so a waiter on any host learns of it when the
commit does.  A change's statements commit one by one, each in one round trip (``Connection``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from ... import limits
from ...errors import BrokerClosed, DatabaseError, UnsupportedOperation
from ...limits import DEFAULT_POSTGRES_SCHEMA
from .. import forks, watch, watchers
from ..base import Connection as BaseConnection
from ..base import GroupStats
from ..dialect import POSTGRES
from ..fileformat import VERSION_TABLE
from ..own import OwnTransactions
from ..per_thread import PerThread, keep_inherited
from ..urls import redacted
from . import legacy
from .connection import Connection, connect_raw, search_path
from .errors import translate
from .locks import BEGIN_READ, MIGRATION, begins
from .notify import ListenSource, TransactionIdProbe, channel
from .snapshot import ExportedTransaction, export

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


class Database:
    """One PostgreSQL database: configured connections (one per thread) and transactions."""

    #: No file: the server keeps the data.
    path: Path | None = None
    dialect = POSTGRES
    #: Changes take the writers' lock shared: they run side by side (see :mod:`.locks`).
    concurrent_changes = True

    def __init__(
        self, url: str, *, durability: str, busy_timeout: float, schema: str = DEFAULT_POSTGRES_SCHEMA
    ) -> None:
        self.location = url
        #: The schema of durableq's tables (a checked name: see ``validation.schema_name``).
        self.schema = schema
        self.name = (
            redacted(url) if schema == DEFAULT_POSTGRES_SCHEMA else f"{redacted(url)} (schema {schema})"
        )
        self._begins = begins(schema)
        #: The channel of this durableq's change notifications (``NOTIFY`` it in a transaction that
        #: changed rows, the application's included, and long polls wake at its commit).
        self.channel = channel(schema)
        # Sent before the COMMIT of a transaction that changed rows, and of each statement's own in a
        # change (Connection.each_statement: if it wrote); see .locks.
        self._notice = self._begins.notify_if_listening(self.channel)
        self._each_end = f"{self._begins.notify_if_listening(self.channel, if_wrote=True)}; COMMIT"
        self.durability = durability
        self.busy_timeout = busy_timeout
        self.own = OwnTransactions()  # the threads inside own_transaction(): refused elsewhere
        self._connections = PerThread(Connection.close)
        self._closed = False
        # Connections of the application's transactions (own_transaction), kept for the next one.
        self._spares: list[Connection] = []
        self._spare_lock = threading.Lock()
        forks.renew_in_child(self, "_spare_lock")
        self._watcher_hold = watchers.WatcherHold(
            lambda: ("postgresql", url, schema),
            self.name,
            self._listen_source,
            lambda: TransactionIdProbe(self.raw_connect),
        )
        _open_databases.add(self)

    def __repr__(self) -> str:
        return f"<postgres.Database {self.name!r}>"

    # -- connections -----------------------------------------------------------------------

    def raw_connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new driver connection with durableq's settings."""
        return connect_raw(
            self.location, self.durability, self.busy_timeout, self.schema, autocommit=autocommit
        )

    def connect(self) -> Connection:
        return Connection(self.raw_connect(), self.location, self.busy_timeout)

    @property
    def conn(self) -> Connection:
        """This thread's connection, opened on first use (and again if the server dropped it, or a
        statement of it was cut off half way: its state is unknown)."""
        if self._closed:
            self._connections.close_mine()  # left to this thread by close(), if it was busy then
            raise BrokerClosed(f"{self.name}: the broker is closed")
        conn = self._connections.current()
        if conn is not None and not (conn.raw.closed or conn.raw.broken or conn.cut_off):
            return conn
        if conn is not None:
            self._connections.release(conn)
        return self._connections.adopt(self.connect())

    def _forget_connections(self) -> None:
        # A forked child must not use its parent's sockets, nor close them (see below): kept.
        keep_inherited(self._connections.forget())
        keep_inherited(self._spares)
        self._spares = []
        self._watcher_hold.forget()

    def is_driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)

    def translated(self, exc: Exception) -> DatabaseError:
        assert isinstance(exc, psycopg.Error)
        return translate(exc, self.location, self.busy_timeout)

    # -- transactions ----------------------------------------------------------------------
    #
    # How each kind begins, and why: see .locks.  A connection is handed out idle, and given back
    # idle or closed: every transaction runs through _transaction, whose one except clause
    # (_restore) covers every step that can fail (the lock of its BEGIN timing out, a statement,
    # NOTIFY or COMMIT, an interrupt, a connection the server dropped).  A connection left inside an
    # aborted transaction would fail every later call of its thread, and hold its locks meanwhile.

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction that runs alone: the writers' lock, exclusively (as SQLite's
        ``BEGIN IMMEDIATE``)."""
        self.own.refuse_outside(self.name)
        return self._transaction(self._begins.write)

    def change(self) -> AbstractContextManager[Connection]:
        """A write of one statement (or a few, in ``conn.one_write()``): the writers' lock, shared."""
        self.own.refuse_outside(self.name)
        return self._transaction(self._begins.change, each=True)

    def read(self) -> AbstractContextManager[Connection]:
        """A read transaction: one ``REPEATABLE READ`` snapshot."""
        return self._transaction(BEGIN_READ)

    def settled_read(self) -> AbstractContextManager[Connection]:
        """A read transaction whose snapshot is *settled*: taken while no write was under way, so
        every event id at or below the highest it shows has committed, or never will (why this is
        needed and why it is correct: see :mod:`.locks`)."""
        self.own.refuse_outside(self.name)
        return self._transaction(self._begins.settled_begin, barrier=self._begins.settled_barrier)

    @property
    def joined_notice(self) -> str | None:
        """Sent inside a joined transaction after an operation: delivered with the application's
        commit, it wakes the long polls of every host then (see :meth:`.base.Database.joined_lock`)."""
        return f"NOTIFY {self.channel}"

    def joined_lock(self, alone: bool) -> str | None:
        """The writers' lock of an operation inside a transaction it did not begin (see
        :attr:`.locks.Begins.joined_write`)."""
        return self._begins.joined_write if alone else self._begins.joined_change

    @contextmanager
    def own_transaction(self) -> Iterator[Connection]:
        """The application's write transaction (``Broker.transaction()``, see
        :meth:`.base.Database.own_transaction`): a plain ``BEGIN`` on a connection of its own (not
        this thread's: the thread's other calls stay outside); the writers' lock is taken by each
        operation inside, as its kind needs, and held to the end.  ``COMMIT`` with ``NOTIFY`` if rows
        changed; a connection that cannot be brought back to idle is closed."""
        with forks.INSIDE, self.own.held(self.name):
            with self._spare_lock:
                conn = self._spares.pop() if self._spares else None
            if conn is None or not conn.idle:
                conn = self.connect()
            changes = conn.changes
            try:
                conn.run("BEGIN")
                yield conn
                changed = conn.changes != changes
                conn.run(f"NOTIFY {self.channel}; COMMIT" if changed else "COMMIT")
            except BaseException:
                conn.rollback()
                if conn.idle:
                    self._give_back(conn)
                else:
                    conn.close()
                raise
            self._give_back(conn)
        if changed:
            self._watcher_hold.committed()

    def _listen_source(self) -> ListenSource:
        """The watcher's change source: a listener, registered so that writers notify it."""
        try:
            return ListenSource(self.raw_connect, self.channel, self._begins.listen)
        except psycopg.Error as exc:
            raise self.translated(exc) from exc

    def _give_back(self, conn: Connection) -> None:
        with self._spare_lock:
            if not self._closed and len(self._spares) < limits.TRANSACTION_SPARES:
                self._spares.append(conn)
                return
        conn.close()

    @contextmanager
    def statement(self) -> Iterator[Connection]:
        """This thread's connection for reads of one statement (autocommit)."""
        with forks.INSIDE:  # in use: close() leaves it to this thread (see per_thread.PerThread)
            yield self.conn

    @contextmanager
    def _transaction(
        self, begin: str, *, barrier: str | None = None, each: bool = False
    ) -> Iterator[Connection]:
        """``begin`` … ``COMMIT`` (with ``NOTIFY`` if rows changed) on this thread's connection (``each``:
        per statement, see ``Connection.each_statement``).  ``barrier``: see ``settled_read``."""
        with forks.INSIDE:  # in use: close() leaves it to this thread (see per_thread.PerThread)
            yield from self._transaction_inside(begin, barrier, each)

    def _transaction_inside(self, begin: str, barrier: str | None, each: bool) -> Iterator[Connection]:
        conn = self.conn
        changes = conn.changes
        # From the barrier's start to begin's end, the session lock may be held (even by a barrier
        # that seemed to fail: an interrupt may cut it off after the server granted it).
        holding = barrier is not None
        try:
            if barrier is not None:
                conn.run(barrier)
                conn.run(begin)  # at once: the barrier's lock is let go by it
            elif each:
                conn.each_statement(begin, self._each_end)
            else:
                conn.begin(begin)  # sent with the first statement, in one round trip
            holding = False
            yield conn
            changed = conn.changes != changes
            conn.finish(f"{self._notice}; COMMIT" if changed else "COMMIT")  # the lock still held
        except BaseException:
            self._restore(conn, holding=holding)
            raise
        if changed:
            self._watcher_hold.committed()

    def _restore(self, conn: Connection, *, holding: bool) -> None:
        """After a transaction failed at any step: roll ``conn`` back to idle, or, where that cannot be
        made sure of (broken, cut off half way, a session lock it may hold), close it (and open anew)."""
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

    def committed_elsewhere(self) -> None:
        """A transaction this engine did not commit changed rows and committed (the application's on
        its own connection): the waiters of this process look now."""
        self._watcher_hold.committed()

    def watcher(self) -> watch.Watcher:
        """The change watcher of this database (one per process and database)."""
        return self._watcher_hold.get()

    def close(self) -> None:
        self._closed = True
        self._watcher_hold.close()
        self._connections.close_all(busy=forks.inside)
        with self._spare_lock:
            spares, self._spares = self._spares, []
        for conn in spares:
            conn.close()

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
        """The alembic revision of durableq's schema (None: durableq never migrated it), or of
        durableq's tables from before revision 0009 (in ``public``: see :mod:`.legacy`)."""
        with self.statement() as conn:
            return legacy.revision(conn, self.schema)

    @contextmanager
    def migration_lock(self) -> Iterator[None]:
        """Only one process migrates the database at a time (a session advisory lock)."""
        conn = self.connect()
        try:
            conn.run(f"SET lock_timeout = {max(1, round(self.busy_timeout * 1000))}")
            conn.run(f"SELECT pg_advisory_lock({MIGRATION})")
            yield
        finally:
            conn.close()  # ends the session, and its lock

    def prepare_migration(self, target: str = "head") -> None:
        """durableq's schema, made if missing, and durableq's tables from before revision 0009 moved
        into it (see :mod:`.legacy`)."""
        with self.statement() as conn:
            legacy.adopt(conn, self.schema)

    def drop_all(self) -> bool:
        """The revisions walk down in durableq's schema, where no application's name is in the way."""
        return False

    def after_downgrade(self, revision: str | None) -> None:
        """See :meth:`..base.Database.after_downgrade` and :func:`.legacy.restore`."""
        with self.statement() as conn:
            legacy.restore(conn, self.schema, revision)

    @contextmanager
    def on_foreign_connection(self, conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
        """For the block, durableq's schema first in the ``search_path`` of ``conn``, a psycopg
        connection of the application's to this database, before the application's own path (see
        :func:`.connection.search_path`), so durableq's statements run on it as on durableq's own
        connections and the application's statements beside them still find its tables.

        Inside a transaction (the application's), the setting is the transaction's own
        (``set_config(..., true)``): a rollback takes it back with everything else.  The previous path
        is set again when the block ends (unless the transaction failed: its rollback restores it).
        On an idle connection in autocommit mode, the session's path is set and set back."""
        local = conn.info.transaction_status != TransactionStatus.IDLE or not conn.autocommit
        try:
            # A cursor of its own row factory: the application's (dict_row...) must not shape it.
            with conn.cursor(row_factory=tuple_row) as cursor:
                (previous,) = cursor.execute("SELECT current_setting('search_path')").fetchone() or ("",)
                cursor.execute(f"SELECT {search_path(self.schema, local=local)}")
        except psycopg.Error as exc:
            raise self.translated(exc) from exc
        try:
            yield conn
        finally:
            if conn.info.transaction_status in (TransactionStatus.IDLE, TransactionStatus.INTRANS):
                with contextlib.suppress(psycopg.Error), conn.cursor(row_factory=tuple_row) as cursor:
                    cursor.execute("SELECT set_config('search_path', %s, %s)", (previous, local))

    @contextmanager
    def application_statement(self, conn: BaseConnection) -> Iterator[None]:
        """For one statement of the application's on ``conn`` (inside a transaction, with durableq's
        schema first in its path): the path without durableq's schema, as the application's own
        connections have it, so what the statement creates is the application's (see
        :meth:`.base.Database.application_statement`); durableq's path back after it."""
        (path,) = conn.execute("SELECT current_setting('search_path')").fetchone()
        own = {self.schema, f'"{self.schema}"'}
        theirs = ", ".join(p for p in (part.strip() for part in path.split(",")) if p and p not in own)
        conn.execute("SELECT set_config('search_path', ?, true)", (theirs,))
        yield
        conn.execute("SELECT set_config('search_path', ?, true)", (path,))

    def export_snapshot(
        self, clock: Callable[[], float], directory: str | os.PathLike[str] | None
    ) -> ExportedTransaction:
        """The live tables as one exported transaction sees them (see :mod:`.snapshot`; nothing is
        copied, so ``directory`` does not apply)."""
        return export(self.location, self.schema, clock, self.busy_timeout)

    def backup(self, dest: Path, file_mode: int) -> None:
        raise UnsupportedOperation(
            f"{self.name}: backup() copies a SQLite file; back a PostgreSQL database up with pg_dump "
            "or the server's own backups"
        )


_open_databases: weakref.WeakSet[Database] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A forked child must not use its parent's sockets (.connection points its copies at /dev/null
    # and keeps them): each database starts afresh, its own connections to come.
    for db in list(_open_databases):
        db._forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)
