"""Where the SQLite engine's statements run: the context managers of ``Database.statement``,
``change`` and ``write`` (classes, not generators: they are on every call's path), each inside
:data:`.forks.INSIDE`, each passing its commits on to the change watcher and translating errors."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from .. import forks
from .connection import BEGIN_WRITE, SqliteConnection
from .errors import translate, unstorable

if TYPE_CHECKING:
    from pathlib import Path

    from ..watchers import WatcherHold
    from .group import Gate


class Owner(Protocol):
    """What the context managers below need of the SQLite engine's database (``.database.Database``)."""

    path: Path
    busy_timeout: float
    #: The group commit's gate, and the hold on the change watcher the commits are passed on to.
    gate: Gate
    watcher_hold: WatcherHold

    @property
    def conn(self) -> SqliteConnection: ...


log = logging.getLogger(__name__)


@contextmanager
def transaction(db: Owner, begin: str) -> Iterator[SqliteConnection]:
    """``begin`` … ``COMMIT`` on this thread's connection of ``db`` (rolled back if the block raises);
    a commit that changed rows is passed on to the change watcher."""
    with forks.INSIDE:
        conn = db.conn
        changes = conn.total_changes
        try:
            conn.execute(begin)
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            rollback(conn)
            raise translate(exc, db.path, db.busy_timeout) from exc
        except UnicodeEncodeError as exc:
            rollback(conn)
            raise unstorable(exc) from None
        except BaseException:
            rollback(conn)
            raise
    if conn.total_changes != changes:
        db.watcher_hold.committed()


class Statement:
    """Context manager of ``Database.statement``, and of ``Database.change`` where it runs alone: this
    thread's connection, each statement committing on its own (a class: it is on every hot path)."""

    __slots__ = ("_changes", "_conn", "_db")

    def __init__(self, db: Owner) -> None:
        self._db = db

    def __enter__(self) -> SqliteConnection:
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
        watcher = self._db.watcher_hold.current
        if watcher is not None and self._conn.total_changes != self._changes:
            watcher.committed()
        if isinstance(exc, sqlite3.Error):
            raise translate(exc, self._db.path, self._db.busy_timeout) from exc
        if isinstance(exc, UnicodeEncodeError):
            raise unstorable(exc) from None


class Grouped:
    """Context manager of ``Database.write`` and ``Database.change``: through the gate of group commit
    (see :mod:`.group`).  A class, not a generator: it is on every write's path."""

    __slots__ = ("_alone", "_db", "_transaction", "_turn")

    def __init__(self, db: Owner, *, transaction: bool) -> None:
        self._db = db
        self._transaction = transaction
        self._alone: AbstractContextManager[SqliteConnection] | None = None
        self._turn: AbstractContextManager[SqliteConnection] | None = None

    def __enter__(self) -> SqliteConnection:
        forks.INSIDE.__enter__()
        try:
            return self._enter()
        except BaseException:
            forks.INSIDE.__exit__()
            raise

    def _enter(self) -> SqliteConnection:
        db = self._db
        member = db.gate.enter()
        if member is None:  # no other write of this process under way: exactly as without the gate
            self._alone = alone = transaction(db, BEGIN_WRITE) if self._transaction else Statement(db)
            try:
                return alone.__enter__()
            except BaseException:
                db.gate.leave()
                raise
        self._turn = turn = db.gate.turn(member)
        return turn.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            if self._alone is not None:
                try:
                    return self._alone.__exit__(exc_type, exc, tb)
                finally:
                    self._db.gate.leave()
            assert self._turn is not None
            return self._turn.__exit__(exc_type, exc, tb)
        finally:
            forks.INSIDE.__exit__()


def rollback(conn: SqliteConnection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # pragma: no cover - SQLite may have rolled back already
            log.debug("rollback failed", exc_info=True)
