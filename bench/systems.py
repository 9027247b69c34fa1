"""The systems a workload drives, behind one small interface: send, receive, delete.

* ``floor``: plain ``sqlite3`` executing the very statements durableq executes
  (imported from the library, so the floor follows it), with durableq's
  pragmas, on a file whose schema durableq created.  Nothing can do the same
  work with fewer statements, so it bounds what durableq can reach.
* ``durableq``: the public API.
* ``persistqueue``, ``litequeue``: the peers, used as their source says they
  are meant to be used, at the closest durability they allow.

Adapters are opened from a :class:`SystemSpec`, which pickles, so a workload
can open the same system in child processes.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sqlite3
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durableq
from durableq import limits
from durableq.engines.dialect import SQLITE
from durableq.ops.claim_standard import _CLAIM_HEAD
from durableq.ops.message_rows import COLUMNS
from durableq.ops.send import _INSERT_PLAIN, new_message_id
from durableq.ops.visibility import _DELETE_ANY_HANDLE

from .adapter import BUSY_TIMEOUT, Adapter, Received, in_transaction
from .minimal import Minimal

QUEUE = "jobs"
#: Peers keep finished rows (ack/done marks a status); the adapter clears them this often with
#: the peer's own clean-up call, so their tables stay small as durableq's do (durableq deletes).
TIDY_EVERY = 100

#: Order in which systems take turns inside a round.
ALL_SYSTEMS = ("minimal", "floor", "durableq", "persistqueue", "litequeue")
PEERS = {"persistqueue": "persist-queue", "litequeue": "litequeue"}  # import name -> distribution

#: What "durability=normal/full" means for each system, for the report.
DURABILITY = {
    "minimal": {"normal": "WAL, synchronous=NORMAL", "full": "WAL, synchronous=FULL"},
    "floor": {"normal": "WAL, synchronous=NORMAL", "full": "WAL, synchronous=FULL"},
    "durableq": {"normal": "WAL, synchronous=NORMAL", "full": "WAL, synchronous=FULL"},
    "persistqueue": {
        "normal": "WAL, synchronous=NORMAL (set by the harness on its private connection)",
        "full": "WAL, synchronous=FULL (SQLite's default; persist-queue sets none)",
    },
    "litequeue": {
        "normal": "WAL, synchronous=NORMAL (hard-coded by litequeue)",
        "full": "WAL, synchronous=FULL (set by the harness on `LiteQueue.conn`)",
    },
}
SEMANTICS = {
    "minimal": (
        "the least a correct queue does: INSERT; one UPDATE … RETURNING claim (visibility, receive count, "
        "fresh handle); DELETE by id and handle; a schema of its own (bench/minimal.py)"
    ),
    "floor": "the statements only: no validation, no Message objects, no counters",
    "durableq": "SQS semantics: visibility timeout, receipt handles, retention, counters",
    "persistqueue": (
        "SQLiteAckQueue: get = SELECT then UPDATE (a thread lock, no transaction: not atomic across "
        "processes); ack marks a status; no visibility timeout"
    ),
    "litequeue": (
        "pop = BEGIN IMMEDIATE + UPDATE … RETURNING (atomic); done marks a status; no visibility timeout"
    ),
}


def missing(name: str) -> str | None:
    """Why a peer cannot run here ("not installed"), or None."""
    if name in PEERS and importlib.util.find_spec(name) is None:
        return "not installed"
    return None


def version(name: str) -> str:
    if name in ("floor", "minimal"):
        return f"SQLite {sqlite3.sqlite_version}"
    distribution = PEERS.get(name, "durableq")
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def create_durableq_file(path: Path, durability: str, queue: str = QUEUE, **settings: Any) -> None:
    """The schema and the queue row, made by durableq itself (the floor's file, too)."""
    with durableq.open(path, durability=durability) as broker:
        broker.create_queue(queue, **settings)


#: Named parameters of the INSERT beyond the ones the floor fills in: optional message fields
#: (like SQS system attributes) that a plain send leaves NULL.  Read from the statement itself,
#: so the floor keeps working, and keeps doing the library's work, when a column is added.
_INSERT_PARAMS = set(re.findall(r"(?<!:):(\w+)", _INSERT_PLAIN))
_FLOOR_FILLS = {"queue_id", "message_id", "body", "now", "size", "kms_key", "sse"}
_INSERT_NULLS = dict.fromkeys(_INSERT_PARAMS - _FLOOR_FILLS)
#: Where the claim's RETURNING row holds what the floor reads (durableq.messages.COLUMNS).
_RETURNED = [name.strip() for name in COLUMNS.split(",")]
_MESSAGE_ID, _RECEIPT_HANDLE = _RETURNED.index("message_id"), _RETURNED.index("receipt_handle")


def _now_ms() -> int:
    return int(time.time() * 1000)


class Floor(Adapter):
    """Plain sqlite3 running durableq's statements: one INSERT, one claiming UPDATE … RETURNING,
    one DELETE per message, each committing on its own as durableq's do on a standard queue."""

    batches = True

    def __init__(self, path: Path, durability: str, queue: str = QUEUE) -> None:
        if not path.exists():
            create_durableq_file(path, durability, queue)
        self._conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        # durableq's broker caches the queue row; its statements bind the queue's id.
        (self._queue_id,) = self._conn.execute(
            "SELECT id FROM durableq_queues WHERE name = ?", (queue,)
        ).fetchone()
        # The pragmas of durableq.database.Database.connect (WAL is stored in the file).
        self._conn.execute(f"PRAGMA synchronous = {durability.upper()}")
        self._conn.execute("PRAGMA temp_store = MEMORY")
        self._conn.execute("PRAGMA journal_size_limit = 67108864")

    def _insert_params(self, body: str) -> dict[str, Any]:
        return {
            **_INSERT_NULLS,  # attributes, delay (the queue's): what a plain send leaves NULL
            "queue_id": self._queue_id,
            "message_id": new_message_id(),
            "body": body,
            "now": _now_ms(),
            "size": len(body.encode("utf-8")),
            "kms_key": "",  # the queue encrypts nothing (the insert checks it still does not)
            "sse": False,
        }

    def _delete_params(self, handle: str) -> dict[str, Any]:
        queue_id, row, secret, _nonce = handle.split(".")
        return {"row": int(row), "secret": secret, "queue_id": int(queue_id)}

    def send(self, body: str) -> None:
        self._conn.execute(_INSERT_PLAIN, self._insert_params(body))

    def receive(self) -> Received | None:
        claimed = self.receive_batch(1)
        return claimed[0] if claimed else None

    def delete(self, token: Any) -> None:
        self._conn.execute(_DELETE_ANY_HANDLE, self._delete_params(token))

    def send_batch(self, bodies: Sequence[str]) -> None:
        in_transaction(self._conn, _INSERT_PLAIN, [self._insert_params(body) for body in bodies])

    def receive_batch(self, limit: int) -> list[Received]:
        params = {
            "queue_id": self._queue_id,
            "now": _now_ms(),
            "limit": limit,
            "timeout": None,
            "cap": limits.MAX_IN_FLIGHT_STANDARD,
            "sealed": False,  # the queue encrypts nothing
        }
        claim = _CLAIM_HEAD[SQLITE][False, "any"]  # a queue's own messages, never sent a group id
        rows = self._conn.execute(claim, params).fetchall()
        return [Received(row[_MESSAGE_ID], row[_RECEIPT_HANDLE]) for row in rows]

    def delete_batch(self, tokens: Sequence[Any]) -> None:
        in_transaction(self._conn, _DELETE_ANY_HANDLE, [self._delete_params(handle) for handle in tokens])

    def close(self) -> None:
        self._conn.close()


class DurableQ(Adapter):
    batches = True

    def __init__(self, path: Path, durability: str, queue: str = QUEUE, **settings: Any) -> None:
        self.broker = durableq.open(path, durability=durability)
        self.queue = self.broker.create_queue(queue, **settings)

    def send(self, body: str) -> None:
        self.queue.send(body)

    def receive(self) -> Received | None:
        messages = self.queue.receive()
        return Received(messages[0].message_id, messages[0].receipt_handle) if messages else None

    def delete(self, token: Any) -> None:
        self.queue.delete(token)

    def send_batch(self, bodies: Sequence[str]) -> None:
        result = self.queue.send_batch([durableq.SendEntry(str(i), body) for i, body in enumerate(bodies)])
        if result.failed:
            raise RuntimeError(f"send_batch failed: {result.failed[0]}")

    def receive_batch(self, limit: int) -> list[Received]:
        return [Received(m.message_id, m.receipt_handle) for m in self.queue.receive(max_messages=limit)]

    def delete_batch(self, tokens: Sequence[Any]) -> None:
        result = self.queue.delete_batch(list(tokens))
        if result.failed:
            raise RuntimeError(f"delete_batch failed: {result.failed[0]}")

    def close(self) -> None:
        self.broker.close()


class _Peer(Adapter):
    """A peer that keeps finished rows: tidies them every :data:`TIDY_EVERY` deletes."""

    def __init__(self) -> None:
        self._finished = 0

    def _count_finished(self) -> None:
        self._finished += 1
        if self._finished % TIDY_EVERY == 0:
            self._tidy()

    @abstractmethod
    def _tidy(self) -> None: ...


class PersistQueue(_Peer):
    """``persistqueue.SQLiteAckQueue``: put, get (raw, for the row id), ack by id."""

    def __init__(self, path: Path, durability: str) -> None:
        super().__init__()
        from persistqueue import SQLiteAckQueue
        from persistqueue.exceptions import Empty

        self._empty = Empty
        # ``path`` is a folder (persist-queue keeps data.db in it).  auto_resume=False: a process
        # that starts must not put back messages another process holds un-acked.
        self._q = SQLiteAckQueue(str(path), auto_resume=False, timeout=BUSY_TIMEOUT)
        # No public way to set pragmas; without multithreading its one connection is _putter.
        connection: sqlite3.Connection = self._q._putter  # type: ignore[assignment]
        connection.execute(f"PRAGMA synchronous = {durability.upper()}")

    def send(self, body: str) -> None:
        self._q.put(body)

    def receive(self) -> Received | None:
        try:
            item = self._q.get(block=False, raw=True)
        except self._empty:
            return None
        return Received(str(item["pqid"]), item["pqid"])

    def delete(self, token: Any) -> None:
        self._q.ack(id=token)
        self._count_finished()

    def _tidy(self) -> None:
        # keep_latest=0: drop every acked row (its default keeps 1000, which its SELECT then skips over).
        self._q.clear_acked_data(max_delete=10 * TIDY_EVERY, keep_latest=0)

    def close(self) -> None:
        self._q.close()


class LiteQueue(_Peer):
    """``litequeue.LiteQueue``: put, pop, done (by message id)."""

    def __init__(self, path: Path, durability: str) -> None:
        super().__init__()
        from litequeue import LiteQueue as _LiteQueue

        self._q = _LiteQueue(str(path), queue_name=QUEUE, timeout=BUSY_TIMEOUT)
        # litequeue sets synchronous=NORMAL itself; "full" overrides it on its public connection.
        self._q.conn.execute(f"PRAGMA synchronous = {durability.upper()}")

    def send(self, body: str) -> None:
        self._q.put(body)

    def receive(self) -> Received | None:
        message = self._q.pop()
        return None if message is None else Received(message.message_id, message.message_id)

    def delete(self, token: Any) -> None:
        self._q.done(token)
        self._count_finished()

    def _tidy(self) -> None:
        self._q.prune()

    def close(self) -> None:
        self._q.close()


_ADAPTERS: dict[str, type[Adapter]] = {
    "minimal": Minimal,
    "floor": Floor,
    "durableq": DurableQ,
    "persistqueue": PersistQueue,
    "litequeue": LiteQueue,
}


def supports_batches(name: str) -> bool:
    return _ADAPTERS[name].batches


@dataclass(frozen=True)
class SystemSpec:
    """How to open a system: picklable, so child processes open their own."""

    name: str
    path: Path
    durability: str

    def open(self) -> Adapter:
        return _ADAPTERS[self.name](self.path, self.durability)  # type: ignore[call-arg]

    def prepare(self) -> None:
        """Create the file and the queue before any timing, and before child processes race to."""
        self.open().close()
