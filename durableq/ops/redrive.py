"""Dead letters: when a message has been received too often, and which queue it goes to then.

The move itself is :mod:`relocation`'s (kind ``DEAD_LETTER``); the rule of when is here, once,
for Python (:func:`exhausted`) and for SQL (:data:`NOT_EXHAUSTED_SQL`).
"""

from __future__ import annotations

import logging

from ..engines.base import Connection
from . import queue_rows
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

#: SQL true for a row of queue ``:queue_id`` that may still be received: its receive count is below
#: the queue's ``max_receive_count``, if the queue has a redrive policy whose dead-letter queue exists
#: (as a queue of the same type).  Read from the live queue rows inside the statement.
NOT_EXHAUSTED_SQL = """receive_count < coalesce((SELECT q.max_receive_count FROM queues q
  JOIN queues d ON d.name = q.dead_letter_queue AND d.fifo = q.fifo WHERE q.id = :queue_id), 2147483647)"""


def exhausted(receive_count: int, queue: QueueConfig) -> bool:
    """True if a message received ``receive_count`` times goes to ``queue``'s dead-letter queue
    instead of being received again (the caller checked that the dead-letter queue exists)."""
    return queue.max_receive_count is not None and receive_count >= queue.max_receive_count


def target_of(conn: Connection, queue: QueueConfig) -> QueueConfig | None:
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
