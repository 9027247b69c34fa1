"""``Broker.transaction()``: durableq's calls inside a transaction of the application's, so that a job
commits, or rolls back, with the application's own writes (the transactional outbox).

Two forms:

- durableq's own connection (``connection=None``): a write transaction that belongs to the application
  for the length of its ``with`` block; ``tx.execute`` runs the application's statements in it, and
  leaving the block commits (at the broker's durability), an exception rolls it back.  On SQLite it
  holds the write gate alone for the whole block: never part of a group commit (``engines/sqlite/
  group.py``), and a fork waits for its end (``engines/forks.py``).
- the application's connection (``connection=``: a ``sqlite3.Connection``, a ``psycopg.Connection``, a
  SQLAlchemy ``Connection`` or ORM ``Session``) to the same database: durableq's statements run on it,
  in the transaction the application commits or rolls back; durableq commits nothing itself.

Either way the operations are the broker's own, run through ``ops/joined.py``.  What a rollback leaves:
nothing in the database (messages, history, counters all written in the transaction); the payload
files of large messages the transaction sent are removed where its end can be seen (the own form and
the SQLAlchemy forms, by their events); after a raw driver's rollback they stay until the payload
store's orphan sweep removes them (``limits.PAYLOAD_ORPHAN_GRACE``).
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .engines.base import Connection, Cursor, Params
from .engines.sqlite.connection import ForeignConnection as ForeignSqlite
from .errors import InvalidParameterValue
from .ops import application_sql, payloads
from .ops.joined import Joined, JoinedRuntime, runtime_in
from .ops.runtime import Runtime

#: Listeners of SQLAlchemy events that fired, to remove at the next listen on the same target.
_stale: weakref.WeakKeyDictionary[Any, list[tuple[str, Callable[..., None]]]] = weakref.WeakKeyDictionary()

#: What ``connection=`` takes, for the error that names them.
ACCEPTED = (
    "a sqlite3.Connection, a psycopg.Connection, a SQLAlchemy Connection or a SQLAlchemy ORM Session "
    "open on the broker's database (or None: durableq's own connection)"
)


class Transaction:
    """A transaction that durableq's calls join: pass it as ``transaction=`` to a queue's ``send``,
    ``send_batch``, ``delete``, ``delete_batch``, ``change_visibility``, ``change_visibility_batch`` or
    ``receive``; what they do commits or rolls back with it.  Made by :meth:`Broker.transaction`;
    closed when its block ends (using it then raises ``InvalidParameterValue``)."""

    def __init__(self, rt: Runtime, joined: Joined, form: str) -> None:
        self._broker = rt
        self._form = form
        self._closed = False
        self._rt: JoinedRuntime = runtime_in(rt, joined)

    def __repr__(self) -> str:
        return f"<durableq.Transaction on {self._form}{' (closed)' if self._closed else ''}>"

    @property
    def closed(self) -> bool:
        """Is the transaction over (its block left, or its session committed or rolled back)?"""
        return self._closed

    def execute(self, sql: str, parameters: Params = ()) -> Cursor:
        """Run one statement of the application's in the transaction, on the same database, and return
        its cursor (``fetchone()``, ``fetchall()``, ``rowcount``, iteration).  Not a statement that
        begins or ends a transaction (``COMMIT``, ``ROLLBACK``, ``SAVEPOINT``...): the block's end is
        the transaction's.  On PostgreSQL it resolves names as the connection would without
        durableq (what it creates is the application's, not in durableq's schema).  Parameters are written as
        ``sqlite3`` writes them (``?`` or ``:name``), on PostgreSQL too.  The driver's errors are raised
        as ``durableq.errors.DatabaseError`` (the driver's error as its ``__cause__``)."""
        if not isinstance(sql, str):
            raise InvalidParameterValue(f"sql must be a string; got {type(sql).__name__}")
        application_sql.check(sql)
        with self._rt.joined.statement() as conn, self._broker.db.application_statement(conn):
            return conn.execute(sql, parameters)

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidParameterValue(
                f"{self!r} is over: its block ended (or its session committed or rolled back); "
                "open a new one with broker.transaction()"
            )

    def _committed(self) -> None:
        self._closed = True
        if self._rt.payloads.settle_due:
            self._broker.payloads.settle()  # the files of the messages it deleted

    def _rolled_back(self) -> None:
        self._closed = True
        for ref in self._rt.payloads.written:
            self._broker.payloads.abandon(ref)  # no row names it now: removed


def runtime_for(rt: Runtime, transaction: Transaction | None) -> Runtime:
    """The runtime a queue's call runs with: the broker's, or, with a transaction, the broker's inside
    it (which must be open, and of the same broker)."""
    if transaction is None:
        return rt
    if not isinstance(transaction, Transaction):
        raise InvalidParameterValue(
            "transaction must be a durableq.Transaction (from broker.transaction()); "
            f"got {type(transaction).__name__}"
        )
    transaction._check_open()
    if transaction._broker is not rt:
        raise InvalidParameterValue(
            f"{transaction!r} belongs to another broker than this queue's (even on the same "
            "database): use the transaction of the broker the queue came from"
        )
    return transaction._rt


@contextmanager
def begin(rt: Runtime, connection: object = None) -> Iterator[Transaction]:
    """``Broker.transaction(connection)`` (see the module)."""
    if connection is None:
        yield from _own(rt)
    else:
        yield from _foreign(rt, connection)


def _own(rt: Runtime) -> Iterator[Transaction]:
    failed = False
    tx: Transaction | None = None
    try:
        with rt.db.own_transaction() as conn:
            tx = Transaction(rt, Joined(rt.db, conn, lambda: _check(tx)), "durableq's own connection")
            try:
                yield tx
            except BaseException:
                failed = True
                raise
            finally:
                tx._closed = True
    except BaseException:
        if failed and tx is not None:
            tx._rolled_back()  # (a commit that failed may have committed: the orphan sweep decides)
        raise
    assert tx is not None
    tx._committed()


def _check(tx: Transaction | None) -> None:
    assert tx is not None
    tx._check_open()


def _foreign(rt: Runtime, connection: object) -> Iterator[Transaction]:
    kind = _kind(connection)
    holder: list[Transaction] = []
    if kind == "sqlalchemy":
        raw, form, before, listen = _sqlalchemy(connection, holder)
    else:
        raw, form, before, listen = connection, f"the application's {type(connection).__module__}", None, None
    adapter, driver_check = _adapt(rt, raw)

    def check() -> None:
        holder[0]._check_open()
        if before is not None:
            before()
        driver_check()

    tx = Transaction(rt, Joined(rt.db, adapter, check, lambda: rt.db.on_foreign_connection(raw)), form)
    holder.append(tx)
    with rt.db.on_foreign_connection(raw):
        _check_database(rt, adapter)
    if listen is not None:
        listen()
    try:
        yield tx
    finally:
        tx._closed = True


def _kind(connection: object) -> str:
    module = type(connection).__module__
    if isinstance(connection, sqlite3.Connection):
        return "sqlite3"
    if module.startswith("psycopg"):
        import psycopg

        if isinstance(connection, psycopg.Connection):
            return "psycopg"
    if module.startswith("sqlalchemy"):
        from sqlalchemy.engine import Connection as CoreConnection
        from sqlalchemy.orm import Session

        if isinstance(connection, (CoreConnection, Session)):
            return "sqlalchemy"
    raise InvalidParameterValue(f"connection must be {ACCEPTED}; got {type(connection).__name__}")


def _adapt(rt: Runtime, raw: Any) -> tuple[Connection, Callable[[], None]]:
    """The engine's interface over the application's driver connection, and the check before each
    operation (it begins the driver's transaction where the driver would, and none is open)."""
    engine = rt.db.dialect.name
    if isinstance(raw, sqlite3.Connection):
        if engine != "sqlite":
            raise InvalidParameterValue(
                f"a sqlite3 connection cannot join a transaction of {rt.db.name}, a PostgreSQL database"
            )
        _sqlite_open(raw, begin=False)
        return ForeignSqlite(raw), lambda: _sqlite_open(raw, begin=True)
    if engine != "postgresql":
        raise InvalidParameterValue(
            f"a psycopg connection cannot join a transaction of {rt.db.name}, a SQLite file; "
            "pass a sqlite3 connection to the file"
        )
    _psycopg_open(raw)
    return on_postgres(rt, raw), lambda: _psycopg_open(raw)


def on_postgres(rt: Runtime, raw: Any) -> Connection:
    """durableq's statements on an application's psycopg connection (each operation of the
    transaction sets durableq's schema on it for its length: ``Database.on_foreign_connection``)."""
    from .engines.postgres.connection import ForeignConnection

    return ForeignConnection(raw, rt.db.location, rt.db.busy_timeout)


def _sqlite_open(raw: sqlite3.Connection, *, begin: bool) -> None:
    """An application's sqlite3 connection has a transaction to join: one open, or one the driver
    begins (as ``BEGIN IMMEDIATE``, so the operations' reads and writes are one: docs/guides/outbox.md)."""
    if raw.in_transaction:
        return
    autocommit = getattr(raw, "autocommit", -1)  # Python 3.12: sqlite3.LEGACY_TRANSACTION_CONTROL
    if autocommit is True or (autocommit == -1 and raw.isolation_level is None):
        raise InvalidParameterValue(
            "the sqlite3 connection is in autocommit mode with no transaction open: there is none to "
            "join; execute BEGIN on it first, or open it with an isolation_level"
        )
    if begin:
        level = "EXCLUSIVE" if (raw.isolation_level or "").upper() == "EXCLUSIVE" else "IMMEDIATE"
        raw.execute(f"BEGIN {level}")


def _psycopg_open(raw: Any) -> None:
    from psycopg.pq import TransactionStatus

    if raw.closed:
        raise InvalidParameterValue("the psycopg connection is closed")
    if raw.autocommit:
        raise InvalidParameterValue(
            "the psycopg connection is in autocommit mode: there is no transaction to join; "
            "use a connection with autocommit=False (psycopg's default)"
        )
    if raw.info.transaction_status == TransactionStatus.INERROR:
        raise InvalidParameterValue(
            "the application's transaction on the psycopg connection has failed; roll it back first"
        )


def _check_database(rt: Runtime, adapter: Connection) -> None:
    """The application's connection is to the broker's database: its identity (made when durableq
    created it) is the broker's."""
    ours = rt.payloads.database_identity()
    try:
        with _quietly(adapter):
            theirs = payloads.identity(adapter)
    except Exception as exc:  # noqa: BLE001 - any failure to read it: not durableq's database
        theirs = f"unreadable ({type(exc).__name__})"
    if theirs != ours:
        raise InvalidParameterValue(
            f"the connection is not to the broker's database {rt.db.name} (its durableq identity is "
            f"{theirs}); pass a connection to the same database"
        )


@contextmanager
def _quietly(adapter: Connection) -> Iterator[None]:
    """A read that may fail without failing the application's transaction (a savepoint where one is
    open on PostgreSQL, where a failed statement would abort it)."""
    if adapter.dialect.name != "postgresql" or not adapter.in_transaction:
        yield
        return
    adapter.execute("SAVEPOINT durableq_check")
    try:
        yield
    except BaseException:
        adapter.execute("ROLLBACK TO SAVEPOINT durableq_check")
        raise
    finally:
        adapter.execute("RELEASE SAVEPOINT durableq_check")


def _sqlalchemy(
    connection: Any, holder: list[Transaction]
) -> tuple[Any, str, Callable[[], None], Callable[[], None]]:
    """The driver connection under a SQLAlchemy Connection or Session (its transaction begun, as
    SQLAlchemy begins one), a check that the transaction is still the one joined, and the events
    that tell the broker of its end."""
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    if isinstance(connection, Session):
        core = connection.connection()  # begins the session's transaction if none is open
        form = "the application's SQLAlchemy Session"
        target, commit_event, rollback_event = connection, "after_commit", "after_rollback"
    else:
        core = connection
        if core.closed or core.invalidated:
            raise InvalidParameterValue("the SQLAlchemy connection is closed")
        if not core.in_transaction():
            core.begin()  # as SQLAlchemy's autobegin would at the next statement
        form = "the application's SQLAlchemy Connection"
        # A Connection's events come before the driver's commit (the commit's own file or NOTIFY tells
        # the waiters), and before its rollback (the transaction's rows are nobody's then).
        target, commit_event, rollback_event = core, "commit", "rollback"
    transaction = core.get_transaction()

    def before() -> None:
        if (
            core.closed
            or transaction is None
            or core.get_transaction() is not transaction
            or not transaction.is_active
        ):
            holder[0]._closed = True
            holder[0]._check_open()

    ended: list[bool] = []

    def end(fired: str) -> bool:
        """The first of the two events: True (then the other's listener goes; the fired one's cannot
        while its event is under way, so it goes at the next listen on the same target)."""
        if ended:
            return False
        ended.append(True)
        for name, fn in listeners:
            if name == fired:
                _stale.setdefault(target, []).append((name, fn))
            else:
                event.remove(target, name, fn)
        return True

    def committed(*_: object) -> None:
        if end(commit_event):
            tx = holder[0]
            tx._committed()
            if commit_event == "after_commit":  # (a Connection's "commit" comes before the commit)
                tx._broker.db.committed_elsewhere()

    def rolled_back(*_: object) -> None:
        if end(rollback_event):
            holder[0]._rolled_back()

    listeners = ((commit_event, committed), (rollback_event, rolled_back))

    def listen() -> None:
        for name, fn in _stale.pop(target, ()):
            event.remove(target, name, fn)
        for name, fn in listeners:
            event.listen(target, name, fn)

    return core.connection.driver_connection, form, before, listen
