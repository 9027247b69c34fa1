"""The operations inside a transaction they do not commit: ``Broker.transaction()``'s, or the
application's own on its own connection (``durableq.transaction``).

The operations are not written twice.  They ask their runtime for a database (``write()``,
``change()``, ``statement()``), counters, a catalog of queue rows and the payload store; a
transaction hands them :func:`runtime_in`, the broker's runtime with these in its place:

- :class:`Joined`, the database: every operation on the transaction's one connection, each in a
  savepoint of its own (an operation that fails leaves the transaction as it found it), after what
  the engine needs to hold until the transaction ends (PostgreSQL's writers' lock, as the operation's
  kind takes it), followed by the engine's notice that the commit delivers (PostgreSQL's ``NOTIFY``);
- counters written at once, in the transaction (:func:`.counters.write_now`): a rollback counts nothing;
- a catalog that reads queue rows in the transaction and never caches them: the broker's cache learns
  nothing from a transaction that may roll back;
- a payload store that remembers the files of the transaction's sends (removed if it rolls back,
  where the transaction's end can be seen) and removes deleted messages' files only after the commit.
"""

from __future__ import annotations

import copy
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import BinaryIO, cast

from ..engines import forks, watch
from ..engines.base import Connection, Database
from ..engines.sqlite.errors import unstorable
from ..errors import DurableQError, InvalidParameterValue
from . import counters, queue_rows
from .counters import Counters
from .payloads import Payloads, StoredPayload
from .queue_rows import Catalog, QueueConfig
from .receive import Receiver
from .retention import Sweeper
from .runtime import Runtime

#: The savepoint of each operation inside a joined transaction.
_SAVEPOINT = "durableq_operation"


class Joined:
    """The database of the operations inside one transaction they do not commit (see the module)."""

    def __init__(
        self,
        db: Database,
        conn: Connection,
        before: Callable[[], None],
        around: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        """``conn``: the transaction's connection (the engine's interface over it); ``before()``: run
        before each operation (raises if the transaction is over; begins the driver's transaction
        where the driver would and none is open); ``around()``: held over each operation (on the
        application's connection, :meth:`.base.Database.on_foreign_connection`: the application may
        commit inside its block and go on in a new transaction, so it is set for each one)."""
        self._db = db
        self.conn = conn
        self._before = before
        self._around = around
        self.dialect = db.dialect
        self.concurrent_changes = db.concurrent_changes
        self.name, self.location, self.path = db.name, db.location, db.path
        self.durability, self.busy_timeout = db.durability, db.busy_timeout

    def write(self) -> AbstractContextManager[Connection]:
        return self._operation(self._db.joined_lock(True))

    def change(self) -> AbstractContextManager[Connection]:
        return self._operation(self._db.joined_lock(False))

    @contextmanager
    def statement(self) -> Iterator[Connection]:
        """The transaction's connection, for reads (they see the transaction's own writes)."""
        self._before()
        with forks.INSIDE, self._around():
            try:
                yield self.conn
            except Exception as exc:
                error = self.translated(exc)
                if error is exc:
                    raise
                raise error from exc

    read = settled_read = statement

    def watcher(self) -> watch.Watcher:
        return self._db.watcher()

    @contextmanager
    def _operation(self, lock: str | None) -> Iterator[Connection]:
        self._before()
        with forks.INSIDE, self._around():
            conn = self.conn
            try:
                conn.execute(f"SAVEPOINT {_SAVEPOINT}")
                if lock is not None:
                    conn.execute(lock)
            except Exception as exc:
                raise self.translated(exc) from exc
            try:
                yield conn
                conn.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
                if self._db.joined_notice is not None:
                    conn.execute(self._db.joined_notice)
            except BaseException as exc:
                self._undo(conn)
                if isinstance(exc, Exception):
                    error = self.translated(exc)
                    if error is not exc:
                        raise error from exc
                raise

    def _undo(self, conn: Connection) -> None:
        """Back to the operation's savepoint: the transaction as the operation found it.  If even that
        fails, the transaction is broken, and the application's commit says so."""
        try:
            conn.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            conn.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        except Exception:  # noqa: BLE001 - the operation's own error is the one to raise
            pass

    def translated(self, exc: Exception) -> Exception:
        """The durableq error for an exception of the transaction's connection (others as they are)."""
        if isinstance(exc, DurableQError):
            return exc
        if self._db.is_driver_error(exc):
            return self._db.translated(exc)
        if isinstance(exc, sqlite3.Error):  # an application's sqlite3 connection on the SQLite engine
            return self._db.translated(exc)
        if isinstance(exc, UnicodeEncodeError):
            return unstorable(exc)
        return exc


class _Counted(Counters):
    """Counters of a joined transaction: each count written at once, in the transaction."""

    def __init__(self, joined: Joined) -> None:  # nothing buffered: no flusher, nothing at exit
        self._joined = joined

    def add(self, queue: str, now: int, kind: int, count: int = 1) -> None:
        with self._joined.statement() as conn:
            counters.write_now(conn, queue, now, kind, count)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Uncached(Catalog):
    """The queue rows a joined transaction sees, read in it and never kept (see the module)."""

    def __init__(self, shared: Catalog) -> None:
        super().__init__()
        self._shared = shared

    def get(
        self, conn: Connection, name: str, *, fresh: bool = False, mark: int | None = None
    ) -> QueueConfig:
        return queue_rows.load(conn, name)

    def forget(self, name: str) -> None:
        self._shared.forget(name)


class _Remembered(Payloads):
    """The broker's payload store, as a joined transaction uses it: the files its sends wrote are
    remembered (:attr:`written`), and deleted messages' files wait for the commit (:attr:`settle_due`)."""

    def __init__(self, shared: Payloads) -> None:  # the shared store's state stays the shared one's
        self._shared = shared
        self.store = shared.store
        self.written: list[str] = []
        self.settle_due = False

    def write(self, source: BinaryIO | None, first: bytes = b"") -> StoredPayload:
        payload = self._shared.write(source, first)
        self.written.append(payload.ref)
        return payload

    def abandon(self, ref: str) -> None:
        self._shared.abandon(ref)  # its operation failed: the savepoint took its row back

    def settle(self) -> None:
        self.settle_due = True  # the rows are gone only once the transaction commits


class JoinedRuntime(Runtime):
    """The type of :func:`runtime_in`'s result (a broker's runtime, inside a transaction)."""

    joined: Joined
    payloads: _Remembered


def runtime_in(rt: Runtime, joined: Joined) -> JoinedRuntime:
    """``rt`` inside a joined transaction: the same clock, keys and readers; the database, counters,
    catalog and payload store of the transaction (see the module)."""
    view = cast(JoinedRuntime, copy.copy(rt))
    view.in_transaction = True
    view.joined = joined
    view.db = cast(Database, joined)  # the operations use write(), change(), statement(), watcher()
    view.catalog = _Uncached(rt.catalog)
    view.counters = _Counted(joined)
    view.sweeper = Sweeper(view.counters)
    view.payloads = _Remembered(rt.payloads)
    view.receiver = Receiver(
        view.db,
        rt.now_ms,
        view.catalog,
        view.sweeper,
        view.counters,
        rt.message_reader,
        rt.dead_letters,
        real_clock=rt.clock is time.time,
    )
    return view


def no_wait(wait_time: int | None) -> int:
    """The wait of a receive inside a transaction: none.  A long poll would hold the transaction (and
    on SQLite the database's write lock) open while it waits, and could never see a message sent
    meanwhile by a commit it blocks."""
    if wait_time is not None and wait_time != 0:
        raise InvalidParameterValue(
            f"a receive inside a transaction cannot wait: wait_time must be 0 (or not given), not "
            f"{wait_time!r}; long-poll outside the transaction"
        )
    return 0
