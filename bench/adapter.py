"""What every system a workload drives offers (send, receive, delete, and batches where it has them),
and the plain-``sqlite3`` helpers the SQL-level systems share (``floor`` in :mod:`.systems`,
``minimal`` in :mod:`.minimal`)."""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

#: Every system waits this long for another writer (durableq's default busy timeout).
BUSY_TIMEOUT = 10.0


class Received(NamedTuple):
    key: str  # the system's message id: what the duplicate checks group by
    token: Any  # what delete needs (a receipt handle, a row id, ...)


class Unsupported(Exception):
    """The system has no such operation (e.g. batches); the report says "n/a"."""


class Adapter(ABC):
    """One open system.  Batch methods exist only where the system has a batch API."""

    batches: ClassVar[bool] = False

    @abstractmethod
    def send(self, body: str) -> None: ...

    @abstractmethod
    def receive(self) -> Received | None:
        """Claim one message (None when nothing is visible)."""

    @abstractmethod
    def delete(self, token: Any) -> None: ...

    def receive_one(self) -> Received:
        """Claim one message that must be there (a workload that sent it knows)."""
        received = self.receive()
        if received is None:
            raise RuntimeError(f"{type(self).__name__}: the queue was empty where a message was expected")
        return received

    def send_batch(self, bodies: Sequence[str]) -> None:
        raise Unsupported

    def receive_batch(self, limit: int) -> list[Received]:
        raise Unsupported

    def delete_batch(self, tokens: Sequence[Any]) -> None:
        raise Unsupported

    @abstractmethod
    def close(self) -> None: ...


def in_transaction(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> None:
    """``executemany`` in one transaction; like durableq's batch paths, ``BEGIN IMMEDIATE`` takes
    the write lock up front."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, params)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
