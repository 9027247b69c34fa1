"""The calls of a queue handle about the queue itself: its settings, depth, counters, history, tags,
permissions and purge.

Each one is a whole call: it opens its transaction, and does what must follow a write: the
management call's audit row (inside the write; the action is its method's, see ``audit.py``), this
broker's cached queue row dropped after a change to it, and the payload files of the messages it
removed.  The public methods of ``Queue`` are one call each to this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import limits, validation
from ..engines.base import Connection
from ..errors import InvalidParameterValue
from ..types import Message, MessageEvent, MinuteMetrics, PeekedMessage, QueueStats, RedrivePolicy
from . import audit, history, peek, permissions, queue_rows, settings, stats
from .counters import PURGED
from .queue_rows import QueueConfig
from .runtime import Runtime


def _fresh(rt: Runtime, conn: Connection, name: str) -> QueueConfig:
    """The queue row as of now (inside a transaction: as of that transaction)."""
    return rt.catalog.get(conn, name, fresh=True)


# -- reads ------------------------------------------------------------------


def attributes(rt: Runtime, name: str) -> dict[str, Any]:
    with rt.db.statement() as conn:
        return settings.attributes(_fresh(rt, conn, name))


def dead_letter_due(rt: Runtime, name: str, message: Message) -> RedrivePolicy | None:
    if not isinstance(message, Message):
        raise InvalidParameterValue(
            f"message must be a received durableq.Message; got {type(message).__name__}"
        )
    with rt.db.statement() as conn:
        return rt.dead_letters.due(conn, _fresh(rt, conn, name), message.receive_count)


def queue_stats(rt: Runtime, name: str) -> QueueStats:
    """The depth by state, after sweeping what expired (when a sweep is due)."""
    with rt.db.write() as conn:
        queue = _fresh(rt, conn, name)
        now = rt.now_ms()
        rt.sweeper.maybe_sweep(conn, queue, now)
        result = stats.queue_stats(conn, queue, now)
    rt.payloads.settle()  # the files of messages the sweep removed
    return result


def metrics(rt: Runtime, name: str, since: datetime | None) -> list[MinuteMetrics]:
    start = 0 if since is None else validation.moment("since", since)
    rt.counters.flush()  # so this process sees its own latest counts
    with rt.db.read() as conn:
        return stats.minute_metrics(conn, _fresh(rt, conn, name), start)


def events(
    rt: Runtime, name: str, since: datetime | None, after: int | None, limit: int
) -> list[MessageEvent]:
    start = None if since is None else validation.moment("since", since)
    if after is not None:
        validation.integer("after", after, 0, limits.MAX_EVENT_ID, "(an event_id)")
    validation.integer("limit", limit, 1, limits.MAX_EVENT_LIMIT, "events")
    with rt.db.settled_read() as conn:  # so that resuming after an id misses none
        return history.events(conn, queue=_fresh(rt, conn, name), since=start, after=after or 0, limit=limit)


def peek_messages(rt: Runtime, name: str, state: str | None, limit: int) -> list[PeekedMessage]:
    with rt.db.read() as conn:
        return peek.peek(conn, _fresh(rt, conn, name), state, limit, rt.now_ms(), rt.sealer)


def tags(rt: Runtime, name: str) -> dict[str, str]:
    with rt.db.statement() as conn:
        return queue_rows.get_tags(conn, _fresh(rt, conn, name))


# -- management calls (audited) -----------------------------------------------


def set_attributes(rt: Runtime, name: str, changes: dict[str, Any]) -> None:
    with rt.db.write() as conn:
        now = rt.now_ms()
        settings.update(conn, _fresh(rt, conn, name), changes, now)
        audit.succeeded(conn, now, {"attributes": sorted(changes)})
    rt.catalog.forget(name)


def add_permission(
    rt: Runtime,
    name: str,
    label: str,
    account_ids: Sequence[str],
    actions: Sequence[str],
    resource: str | None,
) -> None:
    with rt.db.write() as conn:
        queue = _fresh(rt, conn, name)
        now = rt.now_ms()
        permissions.add(conn, queue, label, account_ids, actions, resource or queue.name, now)
        audit.succeeded(conn, now, {"label": label})
    rt.catalog.forget(name)


def remove_permission(rt: Runtime, name: str, label: str) -> None:
    with rt.db.write() as conn:
        now = rt.now_ms()
        permissions.remove(conn, _fresh(rt, conn, name), label, now)
        audit.succeeded(conn, now, {"label": label})
    rt.catalog.forget(name)


def purge(rt: Runtime, name: str) -> None:
    """Remove every message (and what FIFO remembers of them), counted and in the history."""
    with rt.db.write() as conn:
        queue = _fresh(rt, conn, name)
        now = rt.now_ms()
        history.record_where(conn, queue, now, history.PURGED, "queue_id = :queue_id", {"queue_id": queue.id})
        purged: int = conn.execute("DELETE FROM durableq_messages WHERE queue_id = ?", (queue.id,)).rowcount
        for table in ("durableq_fifo_groups", "durableq_fifo_deduplication", "durableq_receive_attempts"):
            conn.execute(f"DELETE FROM {table} WHERE queue_id = ?", (queue.id,))
        audit.succeeded(conn, now, {"purged": purged})
    if purged:
        rt.counters.add(name, now, PURGED, purged)
    rt.payloads.settle()  # the files of the purged messages


def tag(rt: Runtime, name: str, new_tags: dict[str, str]) -> None:
    with rt.db.write() as conn:
        queue_rows.set_tags(conn, _fresh(rt, conn, name), new_tags)
        audit.succeeded(conn, rt.now_ms(), {"keys": sorted(new_tags)})


def untag(rt: Runtime, name: str, keys: tuple[str, ...]) -> None:
    with rt.db.write() as conn:
        queue_rows.remove_tags(conn, _fresh(rt, conn, name), keys)
        audit.succeeded(conn, rt.now_ms(), {"keys": sorted(map(str, keys))})
