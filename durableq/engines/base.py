"""What the operations need from an engine: a connection that runs SQL, and a database that hands
out connections inside the right kind of transaction.  :mod:`.sqlite` and :mod:`.postgres` provide
them; the operations (``durableq.ops``) see only these two protocols."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..errors import DatabaseError
from . import watch
from .group import GroupStats

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
    """One connection: statements in SQLite's spelling (see :mod:`.sql`), run as the engine spells them."""

    def execute(self, sql: str, parameters: Params = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Any, /) -> Cursor: ...

    @property
    def in_transaction(self) -> bool: ...


class Database(Protocol):
    """One open database of either engine (see :class:`.sqlite.Database`, :class:`.postgres.Database`)."""

    #: What :func:`durableq.open` takes to open this database again (a path, or a URL).
    location: str
    #: How messages name it (a URL without its password).
    name: str
    durability: str
    busy_timeout: float

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


class ThreadSlot:
    """Lives exactly as long as one thread's local data (the target of a finalizer)."""

    __slots__ = ("__weakref__",)


C = TypeVar("C")


#: A forked child's copies of its parent's connections that it may not close: kept, never closed nor
#: collected (collecting a SQLite connection closes it).  Closing one could hang (a thread of the
#: parent may have held its lock at the fork: the child would wait for it forever) or end the
#: parent's session.
_inherited: list[object] = []


def keep_inherited(copies: list[Any]) -> None:
    """Keep a forked child's copies of its parent's connections referenced for good."""
    _inherited.extend(copy for copy in copies if copy is not None)


class PerThread(Generic[C]):
    """An engine's connections, one per thread: each closed when its thread ends (thread-local values
    die with their thread; so must the connection, or a server starting a thread per request would
    leak one each time), all closed by :meth:`close_all`.

    A connection is closed by its own thread when another thread is using it: closing a connection
    under a statement of another thread crashes the process.  :meth:`close_all` closes the others at
    once and leaves a busy one to its thread, which closes it at its next call (see
    :meth:`close_mine`) or when it ends.

    Only the process that opened a connection closes it this way.  In a forked child CPython deletes
    every other thread's state, and so fires their finalizers, *before* any fork handler runs: those
    copies are set aside, and :meth:`forget` hands them all to the engine, which knows whether it
    may close them (see :mod:`.forks`).
    """

    def __init__(self, close: Callable[[C], None]) -> None:
        self._close = close
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[tuple[C, int]] = []  # each connection with the thread it belongs to
        self._busy: list[C] = []  # closed by a close_all while their thread used them: theirs to close
        self._copies: list[C] = []  # in a forked child: the parent's, set aside by their finalizers
        self._pid = os.getpid()  # the process whose connections these are

    def __len__(self) -> int:
        return len(self._all)

    def current(self) -> C | None:
        """This thread's connection, if it has one."""
        conn: C | None = getattr(self._local, "conn", None)
        return conn

    def adopt(self, conn: C) -> C:
        """Make ``conn`` this thread's connection."""
        self._local.conn = conn
        self._local.slot = slot = ThreadSlot()
        # Not at exit: a daemon thread may be inside a statement on it then.
        weakref.finalize(slot, self.release, conn).atexit = False
        with self._lock:
            self._all.append((conn, threading.get_ident()))
        return conn

    def release(self, conn: C) -> None:
        """Close ``conn`` (once, whoever asks first: its thread's end, or a replacement)."""
        if os.getpid() != self._pid:
            self._copies.append(conn)  # a forked child's copy (see the class): before the lock, which
            return  # may be held forever
        with self._lock:
            pair = next((pair for pair in self._all if pair[0] is conn), None)
            if pair is not None:
                self._all.remove(pair)
            elif conn in self._busy:
                self._busy.remove(conn)
            else:
                return
        self._close(conn)

    def close_mine(self) -> None:
        """Close this thread's connection if a :meth:`close_all` left it to this thread."""
        conn = self.current()
        if conn is not None:
            del self._local.conn  # (its slot's finalizer, at the thread's end, then finds nothing)
            self.release(conn)

    def close_all(self, busy: Callable[[int], bool]) -> None:
        """Close every connection but those whose thread is inside a call now (``busy(ident)``): their
        threads close them (the database must refuse new calls first, so none starts meanwhile)."""
        me = threading.get_ident()
        with self._lock:
            pairs, self._all = self._all, []
            in_use = [conn for conn, owner in pairs if owner != me and busy(owner)]
            self._busy.extend(in_use)
        for conn, _ in pairs:
            if not any(conn is used for used in in_use):
                self._close(conn)

    def forget(self) -> list[C]:
        """In a forked child: let go of the parent's connections unclosed and start afresh, the
        child's own connections to come; returns the copies for the engine to keep or close."""
        copies = [conn for conn, _ in self._all] + self._busy + self._copies
        self._all, self._busy, self._copies = [], [], []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._local = threading.local()
        return copies


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
