"""The calls of a broker about its queues (create, find, list) and its trails (the audit trail, the
message history of every queue), each a whole call.

Creating a queue writes its row, its tags and its audit row in one transaction (the action is its
method's, see ``audit.py``); a broker first reaps idle temporary queues, at most every few seconds.
Deleting one is ``deletion.py``'s.  The public methods of ``Broker`` are one call each to this
module.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .. import limits, validation
from ..errors import InvalidParameterValue, Reason
from ..limits import DEFAULT
from ..types import AuditEvent, MessageEvent
from . import audit, history, queue_rows, settings
from .runtime import Runtime

# -- queues -------------------------------------------------------------------


def create(
    rt: Runtime,
    name: str,
    fifo: bool,
    given: Mapping[str, Any],
    tags: Mapping[str, str] | None,
    idle_timeout: int | None = None,
) -> bool:
    """Create (or find the same) queue with the settings ``given``; True if it is new."""
    checked_tags = validation.tags(tags) if tags else {}
    if len(checked_tags) > limits.MAX_TAGS:
        raise InvalidParameterValue(
            template="a queue holds at most {high} tags; got {value}",
            parameter="tags",
            value=len(checked_tags),
            high=limits.MAX_TAGS,
            reason=Reason.TOO_MANY,
        )
    rt.temporary_queues.maybe_reap()
    settings_given = {k: v for k, v in given.items() if v is not DEFAULT}
    with rt.db.write() as conn:
        now = rt.now_ms()
        queue, created = settings.create(conn, name, fifo, settings_given, now, idle_timeout)
        if created and checked_tags:
            queue_rows.set_tags(conn, queue, checked_tags)
        detail: dict[str, Any] = {"created": created}
        if idle_timeout is not None:
            detail["idle_timeout"] = idle_timeout
        audit.succeeded(conn, now, detail, queue=name)
    return created


def create_temporary(
    rt: Runtime,
    prefix: str,
    idle_timeout: int,
    fifo: bool,
    tags: Mapping[str, str] | None,
    given: Mapping[str, Any],
) -> str:
    """Create a temporary queue named ``PREFIX-`` and 16 random hex digits (``.fifo`` for a FIFO
    queue), held by this broker; returns its name."""
    if not isinstance(fifo, bool):
        raise InvalidParameterValue(f"fifo must be True or False; got {fifo!r}")
    timeout = validation.integer(
        "idle_timeout", idle_timeout, limits.MIN_IDLE_TIMEOUT, limits.MAX_IDLE_TIMEOUT, "seconds"
    )
    suffix = f"-{secrets.token_hex(8)}{limits.FIFO_SUFFIX if fifo else ''}"
    validation.text("prefix", prefix)
    name = prefix + suffix
    if len(name) > limits.MAX_QUEUE_NAME_LENGTH:
        raise InvalidParameterValue(
            f"prefix must be at most {limits.MAX_QUEUE_NAME_LENGTH - len(suffix)} characters "
            f"(the queue name adds {len(suffix)}); got {len(prefix)}"
        )
    validation.queue_name(name, fifo=fifo)
    create(rt, name, fifo, given, tags, timeout)
    rt.temporary_queues.hold(name, timeout)
    return name


def is_fifo(rt: Runtime, name: str) -> bool:
    """Whether the queue called ``name`` is FIFO; QueueDoesNotExist if there is none."""
    validation.queue_name(name)
    with rt.db.statement() as conn:
        return rt.catalog.get(conn, name).fifo


def list_names(rt: Runtime, prefix: str) -> list[str]:
    rt.temporary_queues.maybe_reap()
    with rt.db.read() as conn:
        return queue_rows.list_names(conn, prefix)


def dead_letter_sources(rt: Runtime, name: str) -> list[str]:
    validation.queue_name(name)
    with rt.db.read() as conn:
        queue_rows.load(conn, name)
        return queue_rows.dead_letter_sources(conn, name)


# -- trails ---------------------------------------------------------------------


def audit_events(
    rt: Runtime, queue: str | None, since: datetime | None, after: int | None, limit: int
) -> list[AuditEvent]:
    if queue is not None:
        validation.text("queue", queue)
    start = None if since is None else validation.moment("since", since)
    if after is not None:
        validation.integer("after", after, 0, limits.MAX_EVENT_ID, "(an event_id)")
    validation.integer("limit", limit, 1, limits.MAX_EVENT_LIMIT, "events")
    with rt.db.settled_read() as conn:  # so that resuming after an id misses none
        return audit.events(conn, queue, start, after, limit)


def message_events(rt: Runtime, after: int, until: int | None, limit: int) -> list[MessageEvent]:
    validation.integer("after", after, 0, limits.MAX_EVENT_ID, "(an event_id)")
    if until is not None:
        validation.integer("until", until, 0, limits.MAX_EVENT_ID, "(an event_id)")
    validation.integer("limit", limit, 1, limits.MAX_EVENT_LIMIT, "events")
    with rt.db.settled_read() as conn:  # so that resuming after an id misses none
        return history.events(
            conn, after=after, until=limits.MAX_EVENT_ID if until is None else until, limit=limit
        )


def newest_event_id(rt: Runtime) -> int:
    with rt.db.settled_read() as conn:
        return history.newest_event_id(conn)
