"""The minimal floor: the least a correct queue must do per message, in plain ``sqlite3``.

Its own two-line schema (no queue id, attributes, groups, counters or
secrets; ids never reused): a send is one INSERT; a receive is one ``UPDATE … RETURNING`` claim
that sets the visibility deadline, counts the receive and issues a fresh
handle; a delete is one DELETE by id and handle.  WAL, the same synchronous
setting as the others.  Where durableq's own-statement floor (``floor``)
shows what durableq's Python costs, this one shows what its schema and
statements cost too.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .adapter import BUSY_TIMEOUT, Adapter, Received, in_transaction

VISIBILITY_MS = 30_000
_SCHEMA = (
    # AUTOINCREMENT: a message's id is never given to another one (SQLite would reuse the highest id
    # after its row is deleted), so the id can be the message's identity.
    "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, "
    "visible_at INTEGER NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0, handle TEXT)",
    "CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at)",
)
_INSERT = "INSERT INTO messages (body, visible_at) VALUES (?, ?)"
_CLAIM = (
    "UPDATE messages SET visible_at = :now + :timeout, receive_count = receive_count + 1, "
    "handle = hex(randomblob(8)) WHERE id IN (SELECT id FROM messages WHERE visible_at <= :now "
    "ORDER BY visible_at LIMIT :limit) RETURNING id, handle"
)
_DELETE = "DELETE FROM messages WHERE id = ? AND handle = ?"


class Minimal(Adapter):
    batches = True

    def __init__(self, path: Path, durability: str) -> None:
        self._conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute(f"PRAGMA synchronous = {durability.upper()}")
        for statement in _SCHEMA:
            self._conn.execute(statement)

    def send(self, body: str) -> None:
        self._conn.execute(_INSERT, (body, _now_ms()))

    def receive(self) -> Received | None:
        claimed = self.receive_batch(1)
        return claimed[0] if claimed else None

    def delete(self, token: Any) -> None:
        self._conn.execute(_DELETE, token)

    def send_batch(self, bodies: Sequence[str]) -> None:
        now = _now_ms()
        in_transaction(self._conn, _INSERT, [(body, now) for body in bodies])

    def receive_batch(self, limit: int) -> list[Received]:
        params = {"now": _now_ms(), "timeout": VISIBILITY_MS, "limit": limit}
        return [Received(str(row[0]), (row[0], row[1])) for row in self._conn.execute(_CLAIM, params)]

    def delete_batch(self, tokens: Sequence[Any]) -> None:
        in_transaction(self._conn, _DELETE, list(tokens))

    def close(self) -> None:
        self._conn.close()


def _now_ms() -> int:
    return int(time.time() * 1000)
