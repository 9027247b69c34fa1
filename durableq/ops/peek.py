"""Looking at messages without receiving them: no claim, no receive count, no side effect."""

from __future__ import annotations

from typing import Any

from .. import limits, validation
from ..engines.base import Connection
from ..errors import DurableQError
from ..types import PeekedMessage
from . import attributes
from .message_rows import format_sequence
from .queue_rows import QueueConfig
from .retention import expired_before
from .sealing import Sealer, open_fields
from .states import STATE_SQL, STATES

_PEEK = f"""
SELECT message_id, body, attributes, receive_count, enqueued_at, visible_at, first_received_at,
       group_id, deduplication_id, sequence, dead_letter_source, state, data_key_id, payload_size
FROM (SELECT *, {STATE_SQL} AS state FROM durableq_messages
      WHERE queue_id = :queue_id AND enqueued_at > :expired_before) AS peeked
WHERE CAST(:state AS TEXT) IS NULL OR state = :state
ORDER BY enqueued_at, id
LIMIT :limit
"""


def peek(
    conn: Connection, queue: QueueConfig, state: str | None, limit: int, now: int, sealer: Sealer
) -> list[PeekedMessage]:
    """Messages without receiving them.  An encrypted message shows its body and attributes only where
    this broker holds its key (else None and {}: its metadata needs no key); a payload stored outside
    shows its size, not its body."""
    if state is not None:
        validation.choice("state", state, STATES)
    validation.integer("limit", limit, 1, limits.MAX_PEEK, "messages")
    rows = conn.execute(
        _PEEK,
        {
            "queue_id": queue.id,
            "expired_before": expired_before(queue.retention_period, now),
            "state": state,
            "limit": limit,
            "now": now,
        },
    ).fetchall()
    return [_peeked(conn, row, sealer) for row in rows]


def _peeked(conn: Connection, row: tuple[Any, ...], sealer: Sealer) -> PeekedMessage:
    body, stored_attributes, data_key_id, payload_size = row[1], row[2], row[12], row[13]
    if data_key_id is not None:
        try:
            aead = sealer.aead(conn, data_key_id)
            body, stored_attributes, _ = open_fields(aead, row[0], (body, stored_attributes, None))
        except DurableQError:
            body, stored_attributes = None, None
    return PeekedMessage(
        message_id=row[0],
        body=None if payload_size is not None else body,
        attributes=attributes.decode(stored_attributes) if stored_attributes else {},
        receive_count=row[3],
        sent_timestamp=row[4],
        visible_timestamp=row[5],
        first_receive_timestamp=row[6],
        group_id=row[7],
        deduplication_id=row[8],
        sequence_number=None if row[9] is None else format_sequence(row[9]),
        dead_letter_source=row[10],
        state=row[11],
        payload_size=payload_size,
        encrypted=data_key_id is not None,
    )
