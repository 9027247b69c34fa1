"""Dead letters: when a message has been received too often, and which queue it goes to then.

The move itself is :mod:`relocation`'s (kind ``DEAD_LETTER``); the rule of when is here, once,
for Python (:func:`exhausted`; :meth:`DeadLetters.due` for a message already received) and for SQL
(:data:`NOT_EXHAUSTED_SQL`).
"""

from __future__ import annotations

import logging

from ..engines.base import Connection
from ..types import RedrivePolicy
from . import queue_rows
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

#: SQL true for a row of queue ``:queue_id`` that may still be received: its receive count is below
#: the queue's ``max_receive_count``, if the queue has a redrive policy whose dead-letter queue exists
#: (as a queue of the same type).  Read from the live queue rows inside the statement.
NOT_EXHAUSTED_SQL = """receive_count < coalesce((SELECT q.max_receive_count FROM durableq_queues q
  JOIN durableq_queues d ON d.name = q.dead_letter_queue AND d.fifo = q.fifo
  WHERE q.id = :queue_id), 2147483647)"""


def exhausted(receive_count: int, queue: QueueConfig) -> bool:
    """True if a message received ``receive_count`` times goes to ``queue``'s dead-letter queue
    instead of being received again (the caller checked that the dead-letter queue exists)."""
    return queue.max_receive_count is not None and receive_count >= queue.max_receive_count


class DeadLetters:
    """One broker's view of its queues' dead-letter queues: which one a queue's messages move to, and
    whether a message's next receive moves it there.  A dead-letter queue that is gone is logged once
    per queue (again if it comes back and goes again), not at every receive."""

    def __init__(self) -> None:
        self._missing: set[tuple[int, str]] = set()  # (queue id, dead-letter queue) logged as gone

    def target(self, conn: Connection, queue: QueueConfig) -> QueueConfig | None:
        """The queue's dead-letter queue, if it has a redrive policy and that queue still exists (as
        a queue of the same type).  Without one, messages stay and are received again, as in SQS."""
        if queue.dead_letter_queue is None:
            return None
        target = queue_rows.find(conn, queue.dead_letter_queue)
        key = (queue.id, queue.dead_letter_queue)
        if target is not None and target.fifo == queue.fifo:
            self._missing.discard(key)
            return target
        if key not in self._missing:
            self._missing.add(key)
            log.warning(
                "queue %r names dead-letter queue %r, which no longer exists as a %s queue; "
                "its messages are not moved and are received again (as in SQS)",
                queue.name,
                queue.dead_letter_queue,
                "FIFO" if queue.fifo else "standard",
            )
        return None

    def due(self, conn: Connection, queue: QueueConfig, receive_count: int) -> RedrivePolicy | None:
        """The redrive policy that moves a message received ``receive_count`` times to its dead-letter
        queue at its next receive, or None: it will be received again (fewer receives, no redrive
        policy, or no dead-letter queue)."""
        if not exhausted(receive_count, queue) or self.target(conn, queue) is None:
            return None
        return queue.redrive_policy
