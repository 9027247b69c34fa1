"""Deleting a queue: the one path every deletion takes (``Broker.delete_queue``, a temporary queue's
own delete and its broker's close, the reaping of idle temporary queues).

One write transaction removes the queue's rows (its messages, tags, counters, FIFO state and its
history, all but a placeholder: see ``history.py``) and records ``DeleteQueue`` in the audit trail.
After it commits, this broker's cached row goes, and so do the payload files of the removed messages
(``payloads.py``: the rows' trigger recorded them in the same transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import validation
from ..engines.base import Connection, Database
from . import audit, history, queue_rows
from .payloads import Payloads
from .queue_rows import Catalog, QueueConfig

#: The audit trail's action for every deletion (SQS's name).
DELETE_QUEUE = "DeleteQueue"

#: Tables whose rows belong to one queue and go when it is deleted (and its history: history.forget).
_QUEUE_OWNED = (
    "durableq_messages",
    "durableq_tags",
    "durableq_queue_metrics",
    "durableq_fifo_groups",
    "durableq_fifo_deduplication",
    "durableq_receive_attempts",
)

#: Which queues a deletion that nobody named picks inside its transaction, each with the reason its
#: audit row records.
Chooser = Callable[[Connection, int], Iterable[tuple[QueueConfig, dict[str, Any]]]]


class QueueDeleter:
    """Deletes the queues of one broker's file, with the audit row, the cache and the payload files."""

    def __init__(
        self, db: Database, clock_ms: Callable[[], int], catalog: Catalog, payloads: Payloads
    ) -> None:
        self._db = db
        self._clock_ms = clock_ms
        self._catalog = catalog
        self._payloads = payloads

    def delete(self, name: str) -> None:
        """``Broker.delete_queue``: the queue ``name`` (QueueDoesNotExist if there is none); its audit
        row is the management call's."""
        validation.queue_name(name)
        with self._db.write() as conn:
            _remove(conn, queue_rows.load(conn, name))
            audit.succeeded(conn, self._clock_ms())
        self._gone([name])

    def delete_chosen(self, choose: Chooser, now: int) -> list[str]:
        """Delete, in one write transaction, the queues ``choose`` picks in it (a temporary queue that
        ends, the idle ones) at ``now``; returns their names."""
        with self._db.write() as conn:
            chosen = list(choose(conn, now))
            for queue, reason in chosen:
                _remove(conn, queue)
                audit.record(conn, now, DELETE_QUEUE, queue.name, detail=reason)
        names = [queue.name for queue, _ in chosen]
        self._gone(names)
        return names

    def _gone(self, names: list[str]) -> None:
        for name in names:
            self._catalog.forget(name)
        self._payloads.settle()  # the files of the removed messages


def _remove(conn: Connection, queue: QueueConfig) -> None:
    for table in _QUEUE_OWNED:
        conn.execute(f"DELETE FROM {table} WHERE queue_id = ?", (queue.id,))
    history.forget(conn, queue)
    conn.execute("DELETE FROM durableq_queues WHERE id = ?", (queue.id,))
    queue_rows.changed(conn)
