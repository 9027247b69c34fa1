"""Message rows as receive returns them, and the in-flight claim every receive path shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..engines.sqlite import in_ids
from ..types import Message
from . import attributes
from .receipts import NEW_HANDLE_SQL

#: The columns :func:`to_message` reads, in its order (after ``id``).
COLUMNS = (
    "id, message_id, body, attributes, receipt_handle, receive_count, enqueued_at, "
    "first_received_at, group_id, deduplication_id, sequence, dead_letter_source, trace_header"
)


def claim_set(visible_at: str) -> str:
    """The SET clause that puts a row in flight: hidden until ``visible_at`` (an SQL
    expression), counted, and given a fresh receipt handle."""
    return f"""
  visible_at = {visible_at},
  receive_count = receive_count + 1,
  received_at = :now,
  first_received_at = coalesce(first_received_at, :now),
  receipt_handle = {NEW_HANDLE_SQL}
"""


#: Claim rows by id (a JSON array), for paths that chose the rows first (FIFO).
CLAIM_IDS = f"""
UPDATE messages SET {claim_set(":visible_at")}
WHERE id IN {in_ids(":ids")}
RETURNING {COLUMNS}
"""


def to_message(row: Sequence[Any]) -> Message:
    """A Message from a row of :data:`COLUMNS` (its first column, the row id, is not shown)."""
    sequence = row[10]
    return Message(
        row[1],
        row[2],
        row[4],
        row[5],
        row[6],
        row[7],
        attributes.decode(row[3]) if row[3] else {},
        row[8],
        row[9],
        None if sequence is None else format_sequence(sequence),
        row[11],
        row[12],
    )


def format_sequence(sequence: int) -> str:
    """FIFO sequence numbers as SQS shows them: decimal, zero-padded so text order is numeric order."""
    return f"{sequence:020d}"
