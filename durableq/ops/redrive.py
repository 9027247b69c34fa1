"""Dead letters: moving a message that was received too often to its dead-letter queue."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence

from . import fifo, queue_rows
from .counters import MOVED, Counters
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

_MOVE_STANDARD = """
UPDATE messages
SET queue_id = :target, dead_letter_source = :source, visible_at = :now,
    receipt_handle = NULL, received_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids))
"""


def target_of(conn: sqlite3.Connection, queue: QueueConfig) -> QueueConfig | None:
    """The queue's dead-letter queue, if it has a redrive policy and that queue still exists."""
    if queue.dead_letter_queue is None:
        return None
    target = queue_rows.find(conn, queue.dead_letter_queue)
    if target is None or target.fifo != queue.fifo:
        log.warning(
            "queue %r names dead-letter queue %r, which no longer exists as a %s queue; "
            "messages are not moved",
            queue.name,
            queue.dead_letter_queue,
            "FIFO" if queue.fifo else "standard",
        )
        return None
    return target


def move(
    conn: sqlite3.Connection,
    source: QueueConfig,
    target: QueueConfig,
    rows: Sequence[tuple[int, str | None]],
    now: int,
    counters: Counters,
) -> None:
    """Move rows (id, group) from ``source`` to its dead-letter queue ``target``.

    The message keeps its id, body, attributes and receive count and records
    its source; a standard message keeps its enqueue time, a FIFO message's
    restarts at the tail of its group in ``target``.
    """
    if not rows:
        return
    if source.fifo:
        groups = [(row_id, group) for row_id, group in rows if group is not None]
        fifo.append_moved(conn, target, groups, now, "dead_letter_source = :source", {"source": source.name})
        fifo.refresh_groups(conn, source.id, (g for _, g in groups))
    else:
        conn.execute(
            _MOVE_STANDARD,
            {"target": target.id, "source": source.name, "now": now, "ids": json.dumps([r for r, _ in rows])},
        )
    counters.add(source.name, now, MOVED, len(rows))
