"""Looking at messages without receiving them: no claim, no receive count, no side effect."""

from __future__ import annotations

import sqlite3

from .. import limits
from ..types import PeekedMessage
from . import attributes, validation
from .messages import format_sequence
from .queue_rows import QueueConfig
from .retention import expired_before
from .states import STATE_SQL, STATES

_PEEK = f"""
SELECT message_id, body, attributes, receive_count, enqueued_at, visible_at, first_received_at,
       group_id, deduplication_id, sequence, dead_letter_source, state
FROM (SELECT *, {STATE_SQL} AS state FROM messages
      WHERE queue_id = :queue_id AND enqueued_at > :expired_before)
WHERE :state IS NULL OR state = :state
ORDER BY enqueued_at, id
LIMIT :limit
"""


def peek(
    conn: sqlite3.Connection, queue: QueueConfig, state: str | None, limit: int, now: int
) -> list[PeekedMessage]:
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
    )
    return [
        PeekedMessage(
            message_id=row[0],
            body=row[1],
            attributes=attributes.decode(row[2]) if row[2] else {},
            receive_count=row[3],
            sent_timestamp=row[4],
            visible_timestamp=row[5],
            first_receive_timestamp=row[6],
            group_id=row[7],
            deduplication_id=row[8],
            sequence_number=None if row[9] is None else format_sequence(row[9]),
            dead_letter_source=row[10],
            state=row[11],
        )
        for row in rows
    ]
