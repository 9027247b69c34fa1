"""Message rows as receive returns them, and the in-flight claim every receive path shares.

A row stores a message in plaintext, or sealed (``sealing.py``), with its body inline or in the payload
store (``payloads.py``); :class:`MessageReader` turns any of them into the public :class:`~durableq.Message`.

A sealed row this broker cannot open (its data key out of reach of the keyring, or damaged; its content
failing its check) is handed out *flagged*: ``message.unreadable`` holds the error, and reading its
content raises it.  It was received like any other, so its holder may delete it and the redrive policy
counts it; the other messages of the receive are returned as usual (docs/promises.md: "Undecryptable
messages").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, BinaryIO

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .. import limits
from ..engines.base import Connection
from ..engines.dialect import Dialect, for_each_dialect
from ..errors import DurableQError, InvalidMessageContents
from ..types import Message
from . import attributes
from .payloads import PayloadStore, StoredPayload
from .sealing import UNOPENABLE, Sealer, open_fields

log = logging.getLogger(__name__)

#: The columns :func:`to_message` reads, in its order (after ``id``).
COLUMNS = (
    "id, message_id, body, attributes, receipt_handle, receive_count, enqueued_at, "
    "first_received_at, group_id, deduplication_id, sequence, dead_letter_source, trace_header, "
    "data_key_id, payload_ref, payload_size, payload_meta"
)


def claim_set(dialect: Dialect, visible_at: str) -> str:
    """The SET clause that puts a row in flight: hidden until ``visible_at`` (an SQL
    expression), counted, and given a fresh receipt handle (in ``dialect``'s SQL)."""
    return f"""
  visible_at = {visible_at},
  receive_count = receive_count + 1,
  received_at = :now,
  first_received_at = coalesce(first_received_at, :now),
  receipt_handle = {dialect.new_handle}
"""


def _claim_ids(d: Dialect, count: int) -> str:
    ids = ", ".join(f":id{i}" for i in range(count))
    return f"""
UPDATE durableq_messages SET {claim_set(d, ":visible_at")}
WHERE id IN ({ids})
RETURNING {COLUMNS}
"""


#: Claim rows by id, for paths that chose the rows first (FIFO): the statement for each number of rows
#: a receive takes, the ids bound one by one (a JSON array through ``in_ids`` cost SQLite's
#: ``json_each`` about a quarter of the claim, issue 30).
CLAIM_IDS = for_each_dialect(
    lambda d: {count: _claim_ids(d, count) for count in range(1, limits.MAX_MESSAGES_PER_RECEIVE + 1)}
)


def claim_ids(conn: Connection, ids: Sequence[int], visible_at: int, now: int) -> list[Any]:
    """Put the rows ``ids`` (at most a receive's worth) in flight until ``visible_at``: their rows of
    :data:`COLUMNS`, in no particular order."""
    params: dict[str, int] = {f"id{i}": row_id for i, row_id in enumerate(ids)}
    params["visible_at"] = visible_at
    params["now"] = now
    statement = CLAIM_IDS[conn.dialect].get(len(ids)) or _claim_ids(conn.dialect, len(ids))
    return conn.execute(statement, params).fetchall()


def to_message(row: Sequence[Any]) -> Message:
    """A Message from a row of :data:`COLUMNS` stored in plaintext and inline (its first column, the
    row id, is not shown); :meth:`MessageReader.messages` takes any row."""
    return _message(row, row[2], attributes.decode(row[3]) if row[3] else {}, None, None)


def format_sequence(sequence: int) -> str:
    """FIFO sequence numbers as SQS shows them: decimal, zero-padded so text order is numeric order."""
    return f"{sequence:020d}"


class MessageReader:
    """Reads stored rows into Messages for one broker: sealed fields opened with its data keys,
    payloads linked to its store."""

    def __init__(self, sealer: Sealer, store: PayloadStore) -> None:
        self.sealer = sealer
        self.store = store

    def messages(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> list[Message]:
        """The Messages of rows of :data:`COLUMNS`, in order, inside the receive's transaction: each row
        this broker cannot open is handed out flagged (see the module's docstring), so one message never
        blocks the others.  (A broker that can open no message of an encrypting queue was refused the
        receive before it claimed anything: ``Sealer.require_keys``.  A sealed row that reached a plain
        queue, by a dead-letter move or a move task, is that one message's trouble.)"""
        keys: dict[int, AESGCM | DurableQError] = {}  # the rows of a receive mostly share a data key
        return [self._message(conn, row, keys) for row in rows]

    def _message(
        self, conn: Connection, row: Sequence[Any], keys: dict[int, AESGCM | DurableQError]
    ) -> Message:
        data_key_id, ref, size, meta = row[13], row[14], row[15], row[16]
        if data_key_id is None and ref is None:
            return to_message(row)
        message_id, body, stored_attributes = row[1], row[2], row[3]
        if data_key_id is not None:
            key = keys.get(data_key_id)
            if key is None:
                key = keys[data_key_id] = self._key(conn, data_key_id)
            try:
                if isinstance(key, DurableQError):
                    raise key
                body, stored_attributes, meta = open_fields(key, message_id, (body, stored_attributes, meta))
            except UNOPENABLE as exc:
                log.warning("message %s is handed out flagged: %s: %s", message_id, exc.code, exc.message)
                return _message(row, None, {}, size, _Unreadable(exc))
        content = (
            None if ref is None else _Payload(self.store, StoredPayload.from_row(ref, size, meta), message_id)
        )
        decoded = attributes.decode(stored_attributes) if stored_attributes else {}
        return _message(row, None if content else body, decoded, size, content)

    def _key(self, conn: Connection, data_key_id: int) -> AESGCM | DurableQError:
        """Data key ``data_key_id``, or why this broker cannot have it (kept for the receive's other
        rows under it)."""
        try:
            return self.sealer.aead(conn, data_key_id)
        except UNOPENABLE as exc:
            return exc


def _message(  # the one place a row's columns become a Message
    row: Sequence[Any],
    text: str | None,
    decoded: dict[str, Any],
    size: int | None,
    content: _Payload | _Unreadable | None,
) -> Message:
    sequence = row[10]
    return Message(
        row[1],
        text,
        row[4],
        row[5],
        row[6],
        row[7],
        decoded,
        row[8],
        row[9],
        None if sequence is None else format_sequence(sequence),
        row[11],
        row[12],
        size,
        content,
    )


class _Payload:
    """The content of a message whose body is in the payload store."""

    __slots__ = ("_message_id", "_payload", "_store")

    def __init__(self, store: PayloadStore, payload: StoredPayload, message_id: str) -> None:
        self._store = store
        self._payload = payload
        self._message_id = message_id

    def text(self) -> str:
        with self.open() as stream:
            data = stream.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidMessageContents(
                f"the payload of message {self._message_id} ({self._payload.size} bytes) is binary, not "
                "UTF-8 text: read it with message.open_payload()"
            ) from None

    def md5(self) -> str:
        return self._payload.md5

    def open(self) -> BinaryIO:
        return self._store.open(self._payload, self._message_id)

    @property
    def error(self) -> DurableQError | None:
        return None  # checked as it is read


class _Unreadable:
    """The content of a sealed message this broker could not open: every use raises why."""

    __slots__ = ("_error",)

    def __init__(self, error: DurableQError) -> None:
        self._error = error

    @property
    def error(self) -> DurableQError:
        return self._error

    def _raise(self) -> DurableQError:
        return type(self._error)(self._error.message)  # a new one each time: no traceback piles up

    def text(self) -> str:
        raise self._raise()

    def md5(self) -> str:
        raise self._raise()

    def open(self) -> BinaryIO:
        raise self._raise()
