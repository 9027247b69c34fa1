"""The SQLite engine's connection: ``sqlite3``'s own (every statement straight to the driver, nothing
in between on the hot path), with what the operations ask of a connection besides
(:class:`..base.Connection`), and how a write transaction begins on it."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from ..dialect import SQLITE

#: How a write transaction begins: the write lock taken up front, so it never fails half-way on a lock
#: upgrade (a plain ``BEGIN`` takes it at the first write, and fails there if another writer came).
BEGIN_WRITE = "BEGIN IMMEDIATE"

#: A block already inside a transaction: nothing to add.
_IN_OPEN_TRANSACTION: AbstractContextManager[None] = nullcontext()


class SqliteConnection(sqlite3.Connection):
    """A ``sqlite3`` connection that says its dialect (made by ``sqlite3.connect(factory=...)``)."""

    dialect = SQLITE

    def one_write(self) -> AbstractContextManager[None]:
        """The statements of the block as one write (see :meth:`..base.Connection.one_write`): a
        transaction of their own where the connection is in autocommit, else the open one."""
        return _IN_OPEN_TRANSACTION if self.in_transaction else _OneWrite(self)


class _OneWrite:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` around a block, rolled back if it raises (a class: it is on the
    path of every standard send, receive and delete of a queue that keeps history)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute(BEGIN_WRITE)

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self._conn.execute("COMMIT")
        elif self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


class ForeignConnection:
    """An application's own ``sqlite3`` connection to the file, with the interface the operations use
    (``Broker.transaction(connection=...)``): its cursors hand back tuples whatever row factory the
    application set.  Never committed, never closed; the statements run in the application's
    transaction."""

    __slots__ = ("raw",)

    dialect = SQLITE

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw

    def _cursor(self) -> sqlite3.Cursor:
        cursor = self.raw.cursor()
        cursor.row_factory = None
        return cursor

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return self._cursor().executemany(sql, parameters)

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def one_write(self) -> AbstractContextManager[None]:
        """Inside the application's transaction already (the operations run in one)."""
        return _IN_OPEN_TRANSACTION
