"""PostgreSQL connections: a driver connection with durableq's settings, and the :class:`Connection`
the operations use (the interface of ``sqlite3.Connection``: ``execute``, ``executemany``,
``in_transaction``), which counts the rows it changed for the commit's ``NOTIFY``.

A forked child never closes its copies of the driver connections this process opened (closing one would
end the parent's session): see :func:`_after_fork_in_child`."""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from decimal import Decimal
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from ..base import Cursor, Params
from ..dialect import POSTGRES
from .errors import refused, translate, unstorable
from .prepared import Statements
from .prepared import placeholders as placeholders  # where the tests and .snapshot import it from

log = logging.getLogger(__name__)

_SYNCHRONOUS = {"full": "on", "normal": "off"}
_WRITES = ("INSERT", "UPDATE", "DELETE")

#: A block already inside a transaction: nothing to add.
_IN_OPEN_TRANSACTION: AbstractContextManager[None] = nullcontext()
#: Every driver connection this process opened (the watcher's too), for the fork handler below.
_raw_connections: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
#: A forked child's copies of its parent's connections: kept, never closed (see below).
_inherited: list[psycopg.Connection[Any]] = []


class _NumericLoader(Loader):
    """``sum()`` of integers is ``numeric`` in PostgreSQL: hand back an int, as SQLite does."""

    def load(self, data: Any) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


def connect_raw(
    location: str, durability: str, busy_timeout: float, schema: str, *, autocommit: bool = True
) -> psycopg.Connection[Any]:
    """A new driver connection to ``location`` with durableq's settings: the durability's
    ``synchronous_commit``, ``busy_timeout`` as the connect and lock timeouts, UTC, integer sums, and
    durableq's ``schema`` first in the ``search_path`` (see :func:`search_path`)."""
    url = location.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        raw = psycopg.connect(
            url,
            autocommit=True,  # the settings below are the session's (a rollback would undo them)
            cursor_factory=psycopg.Cursor,
            connect_timeout=max(1, round(busy_timeout)),
            application_name="durableq",
        )
        _raw_connections.add(raw)
        raw.adapters.register_loader("numeric", _NumericLoader)
        raw.execute(
            f"SET synchronous_commit = {_SYNCHRONOUS[durability]}; "
            f"SET lock_timeout = {max(1, round(busy_timeout * 1000))}; "
            "SET TIME ZONE 'UTC'; "
            f"SELECT {search_path(schema)}"
        )
        raw.autocommit = autocommit
    except psycopg.Error as exc:
        raise translate(exc, location, busy_timeout) from exc
    return raw


def search_path(schema: str, *, local: bool = False) -> str:
    """The expression that puts ``schema`` (a checked name) first in the connection's ``search_path``,
    before whatever the path was (the server's or the role's default: ``"$user", public``).

    Why first, and why the rest kept after it: durableq's statements name its tables unqualified
    (``durableq_messages``), so they resolve in its schema, and nothing it creates lands elsewhere;
    the names behind it are the application's, which a statement of the application's own run on
    this connection (``Broker.transaction``) must still find.  Nothing of the application's is
    shadowed, as every name in durableq's schema begins ``durableq_``, a name no application table
    may take in a database durableq shares.  ``local``: for the transaction under way only."""
    path = f"concat_ws(', ', '{schema}', nullif(current_setting('search_path'), ''))"
    return f"set_config('search_path', {path}, {'true' if local else 'false'})"


def close_quietly(raw: psycopg.Connection[Any], what: str) -> None:
    """Close a driver connection; a failure to close is logged, not raised (closing is best effort)."""
    try:
        raw.close()
    except psycopg.Error:  # pragma: no cover - the server or the socket is gone already
        log.debug("closing %s failed", what, exc_info=True)


@lru_cache(maxsize=64)
def _statements(joined: str) -> tuple[str, ...]:
    """The engine's own statements joined by ``"; "``, one by one.  Once per text, not per transaction."""
    return tuple(joined.split("; "))


@lru_cache(maxsize=1024)
def _is_write(statement: str) -> bool:
    """Does ``statement`` change rows (so that its commit notifies)?  Once per statement text."""
    return statement.lstrip().upper().startswith(_WRITES)


class Connection:
    """One server connection with the interface the operations use (that of ``sqlite3.Connection``):
    sqlite3's parameter style, translated errors, and a count of changed rows."""

    __slots__ = ("_begin", "_busy_timeout", "_each", "_location", "_statements", "changes", "raw")

    dialect = POSTGRES

    def __init__(self, raw: psycopg.Connection[Any], location: str, busy_timeout: float) -> None:
        self.raw = raw
        self._location = location
        self._busy_timeout = busy_timeout
        self.changes = 0
        #: The statements this connection prepared (see :mod:`.prepared`).
        self._statements = Statements(raw)
        #: A transaction's beginning not sent yet (see :meth:`begin`).
        self._begin: tuple[str, ...] = ()
        #: Inside ``Database.change()``: how each statement's own transaction begins and ends (see
        #: :meth:`each_statement`).
        self._each: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def begin(self, statements: str) -> None:
        """Begin a transaction with ``statements`` (the engine's own, no parameters, joined by
        ``"; "``), sent with the transaction's first statement in one round trip (one query string,
        see :mod:`.prepared`; an ``executemany``'s in psycopg's pipeline mode), not on their own:
        ``BEGIN`` and the writers' lock cost no round trip of their own, and a transaction that runs
        no statement costs none at all."""
        self._begin = _statements(statements)

    def each_statement(self, begin: str, end: str) -> None:
        """``Database.change()``: until :meth:`finish`, each statement runs in a transaction of its own,
        ``begin`` (the writers' lock, shared), the statement, ``end`` (a ``NOTIFY`` if it wrote and a
        long poll listens, ``COMMIT``), sent together in one round trip; the statements of a
        :meth:`one_write` block share one.  SQLite's rule for a change (each statement commits on its
        own, unless grouped), so the operations, written for both engines, rely on no more."""
        self._each = (_statements(begin), _statements(end))

    def finish(self, command: str) -> None:
        """End the transaction with ``command`` (``COMMIT``, maybe after a ``NOTIFY``), unless it never
        began on the server (no statement ran: nothing to commit), or each statement committed on its
        own (:meth:`each_statement`)."""
        each, self._each = self._each, None
        if self._begin:
            self._begin = ()
            return
        if each is not None and self.raw.pgconn.transaction_status == TransactionStatus.IDLE:
            return
        self.run(command)

    def execute(self, statement: str, parameters: Params = (), /) -> Cursor:
        if self._begin:
            begin, self._begin = self._begin, ()
            return self._one_round_trip(statement, parameters, begin, ())
        if self._each is not None and self.raw.pgconn.transaction_status == TransactionStatus.IDLE:
            return self._one_round_trip(statement, parameters, *self._each)
        if not parameters:  # nothing bound: psycopg sends the text as it is (a "%" stays one)
            return self._run(statement, lambda cursor: cursor.execute(statement))
        return self._run(statement, lambda cursor: cursor.execute(placeholders(statement), parameters))

    def executemany(self, statement: str, parameters: Any, /) -> Cursor:
        return self._run(statement, lambda cursor: cursor.executemany(placeholders(statement), parameters))

    def _run(self, statement: str, call: Callable[[psycopg.Cursor[Any]], object]) -> Cursor:
        """Run ``statement`` by ``call`` on a new cursor (see :meth:`_checked`)."""

        def run() -> Cursor:
            cursor = self._cursor()
            if self._begin:
                begin, self._begin = self._begin, ()
                self._pipelined(cursor, call, begin, ())
            elif self._each is not None and self.raw.pgconn.transaction_status == TransactionStatus.IDLE:
                self._pipelined(cursor, call, *self._each)
            else:
                call(cursor)
            return cursor

        return self._checked(statement, run)

    def _one_round_trip(
        self, statement: str, parameters: Params, begin: tuple[str, ...], end: tuple[str, ...]
    ) -> Cursor:
        """``statement`` between the engine's own ``begin`` and ``end`` statements, in one round trip
        (see :meth:`.prepared.Statements.round_trip` and :meth:`_checked`)."""
        rollback = self._rollback_transaction
        return self._checked(
            statement, lambda: self._statements.round_trip(statement, parameters, begin, end, rollback)
        )

    def _checked(self, statement: str, run: Callable[[], Cursor]) -> Cursor:
        """The cursor ``run()`` ran ``statement`` on; errors translated, changed rows counted (for the
        commit's NOTIFY)."""
        try:
            cursor = run()
        except psycopg.Error as exc:
            if refused(exc):
                raise unstorable(exc) from None
            raise translate(exc, self._location, self._busy_timeout) from exc
        except (UnicodeEncodeError, ValueError) as exc:
            raise unstorable(exc) from None
        if cursor.rowcount > 0 and _is_write(statement):
            self.changes += cursor.rowcount
        return cursor

    def _pipelined(
        self,
        cursor: psycopg.Cursor[Any],
        call: Callable[[psycopg.Cursor[Any]], object],
        begin: tuple[str, ...],
        end: tuple[str, ...],
    ) -> None:
        """An ``executemany`` between the engine's own ``begin`` and ``end`` statements, in one round
        trip (psycopg's pipeline mode).  If one fails (the writers' lock timed out, the statement, the
        commit), those after it do not run and the error is the first one's; the connection is then in
        a failed transaction, which the caller rolls back.

        Except that, when one fails, the server skips the rest, the first preparation of a statement
        among them too, which psycopg (preparing a statement at its sixth run) then takes for
        prepared: its next run would find no such statement.  So a failed round trip rolls back and
        closes the connection, and the thread's next call opens another."""
        try:
            with self.raw.pipeline():
                for statement in begin:
                    self.raw.execute(statement)
                call(cursor)
                for statement in end:
                    self.raw.execute(statement)
        except psycopg.Error:
            with contextlib.suppress(psycopg.Error):
                self.raw.execute("ROLLBACK")  # at once (the server would, once it saw the close)
            close_quietly(self.raw, "a connection whose round trip failed")
            raise

    def _cursor(self) -> psycopg.Cursor[Any]:
        return self.raw.cursor()

    @property
    def in_transaction(self) -> bool:
        return (
            bool(self._begin)
            or self._each is not None
            or self.raw.pgconn.transaction_status != TransactionStatus.IDLE
        )

    def one_write(self) -> AbstractContextManager[None]:
        """The statements of the block as one write (see :meth:`..base.Connection.one_write`): in a
        ``Database.change()`` between statements, a transaction of the block's own; inside a
        transaction already (``Database.write``'s, or another block's), part of it."""
        if (
            self._each is not None
            and not self._begin
            and self.raw.pgconn.transaction_status == TransactionStatus.IDLE
        ):
            return _OneWrite(self, self._each)
        if not self.in_transaction:
            raise RuntimeError("a write runs inside Database.change() or Database.write(), never alone")
        return _IN_OPEN_TRANSACTION

    @property
    def idle(self) -> bool:
        """Open, and neither inside a transaction nor running a statement: fit to hand out."""
        return (
            not self._begin
            and not self.raw.closed
            and self.raw.pgconn.transaction_status == TransactionStatus.IDLE
        )

    @property
    def cut_off(self) -> bool:
        """Is a statement still under way (an interrupt came while the driver waited for it)?"""
        return self.raw.pgconn.transaction_status in (TransactionStatus.ACTIVE, TransactionStatus.UNKNOWN)

    def run(self, command: str) -> None:
        """A statement of the engine's own (no parameters; several may be joined by ``;``), after the
        transaction's beginning if it is still to be sent."""
        if self._begin:
            begin, self._begin = self._begin, ()
            command = "; ".join((*begin, command))
        try:
            self.raw.execute(command)
        except psycopg.Error as exc:
            raise translate(exc, self._location, self._busy_timeout) from exc

    def rollback(self) -> None:
        self._each = None
        self._rollback_transaction()

    def _rollback_transaction(self) -> None:
        self._begin = ()  # not sent: nothing began
        if self.raw.closed or not self.in_transaction:
            return
        try:
            self.raw.execute("ROLLBACK")
        except psycopg.Error:  # the connection broke: the server rolled back
            log.debug("rollback failed", exc_info=True)

    def close(self) -> None:
        close_quietly(self.raw, "a connection")


class _OneWrite:
    """A :meth:`Connection.one_write` block inside ``Database.change()``: one transaction, begun with
    its first statement, ended (or rolled back, if the block raises) with the block."""

    __slots__ = ("_conn", "_each")

    def __init__(self, conn: Connection, each: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        self._conn = conn
        self._each = each

    def __enter__(self) -> None:
        self._conn._begin = self._each[0]

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        conn = self._conn
        if kind is not None:
            conn._rollback_transaction()
        elif conn._begin:  # no statement ran
            conn._begin = ()
        else:
            conn.run("; ".join(self._each[1]))


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


os.register_at_fork(after_in_child=_after_fork_in_child)


class ForeignConnection(Connection):
    """An application's own psycopg connection, with the interface the operations use
    (``Broker.transaction(connection=...)``): its cursors hand back tuples and integer sums whatever
    row factory and loaders the application set on the connection.  Never committed, never closed."""

    __slots__ = ()

    def _cursor(self) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor(row_factory=tuple_row)
        cursor.adapters.register_loader("numeric", _NumericLoader)
        return cursor
