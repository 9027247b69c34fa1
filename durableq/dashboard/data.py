"""What the pages show, read through the public library: nothing here knows a table or a statement."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import durableq
from durableq.types import COUNTERS, MESSAGE_STATES, AuditEvent, MessageEvent, PeekedMessage

from . import charts

#: Audit events read per query while looking for the newest ones.
AUDIT_PAGE = 10_000
#: The counters a queue's page draws, each chart with its series.
CHARTS = {
    "Messages per minute": ("sent", "received", "deleted"),
    "Empty receives and dead letters per minute": ("empty_receives", "moved_to_dead_letter", "expired"),
}


@dataclass
class QueueRow:
    """One line of the overview."""

    name: str
    fifo: bool
    temporary: bool
    history: bool
    depth: dict[str, int]
    oldest_age: int
    dead_letter_queue: str | None
    sources: list[str] = field(default_factory=list)  # queues whose dead-letter queue this one is


def overview(broker: durableq.Broker) -> list[QueueRow]:
    """Every queue with its depth by state, oldest age and dead-letter links."""
    rows = []
    for name in broker.list_queues():
        try:
            rows.append(_row(broker, broker.get_queue(name)))
        except durableq.QueueDoesNotExist:
            continue  # deleted since the listing
    return rows


def schedules(broker: durableq.Broker) -> list[durableq.Schedule]:
    """Every schedule, by name (their next tick, their queue, paused or not)."""
    return broker.list_schedules()


def overview_row(broker: durableq.Broker, name: str) -> QueueRow:
    """One queue's line of the overview (QueueDoesNotExist if there is none)."""
    return _row(broker, broker.get_queue(name))


def _row(broker: durableq.Broker, queue: durableq.Queue) -> QueueRow:
    settings = queue.attributes()
    stats = queue.stats()
    policy = settings.get("redrive_policy")
    return QueueRow(
        name=queue.name,
        fifo=queue.fifo,
        temporary=settings.get("idle_timeout") is not None,
        history=bool(settings.get("history")),
        depth={state.name: getattr(stats, state.count) for state in MESSAGE_STATES},
        oldest_age=stats.oldest_message_age,
        dead_letter_queue=None if policy is None else policy.dead_letter_queue,
        sources=broker.dead_letter_source_queues(queue.name),
    )


@dataclass
class QueuePage:
    row: QueueRow
    settings: dict[str, Any]
    tags: dict[str, str]
    charts: list[str]
    messages: list[PeekedMessage]
    moves: list[durableq.MoveTask]


def queue_page(broker: durableq.Broker, name: str, *, hours: int, limit: int, now: datetime) -> QueuePage:
    """A queue's settings, charts of its counters over the last ``hours``, and its waiting messages."""
    queue = broker.get_queue(name)
    row = _row(broker, queue)
    first = (now - timedelta(hours=hours)).replace(second=0, microsecond=0)
    minutes = [first + timedelta(minutes=i) for i in range(hours * 60 + 1)]
    counts = {
        m.minute.astimezone(UTC): {name: getattr(m, name) for name in COUNTERS}
        for m in queue.metrics(since=first)
    }
    drawn = [
        charts.line_chart(title, minutes, charts.per_minute(minutes, counts, names))
        for title, names in CHARTS.items()
    ]
    return QueuePage(
        row=row,
        settings=queue.attributes(),
        tags=queue.tags(),
        charts=drawn,
        messages=queue.peek(limit=limit),
        moves=broker.list_message_moves(name),
    )


def message_history(broker: durableq.Broker, queue: str, message_id: str, scan: int) -> list[MessageEvent]:
    """A message's events, oldest first, among the queue's last ``scan`` events."""
    return [e for e in _last_events(broker.get_queue(queue), scan) if e.message_id == message_id]


def _last_events(queue: durableq.Queue, scan: int) -> list[MessageEvent]:
    # Events only grow; reading from the start up to ``scan`` of them would show the oldest, not
    # the newest, so page through and keep the tail.
    kept: list[MessageEvent] = []
    after: int | None = None
    while True:
        page = queue.events(after=after, limit=scan)
        if not page:
            return kept
        kept = (kept + page)[-scan:]
        after = page[-1].event_id


def audit(
    broker: durableq.Broker, *, queue: str | None, action: str | None, outcome: str | None, limit: int
) -> list[AuditEvent]:
    """The newest ``limit`` calls of the audit trail that match, newest first: by queue, action and
    outcome ("OK" or "refused").  The trail is read oldest first, page by page, keeping the tail."""

    def matches(event: AuditEvent) -> bool:
        if action and event.action != action:
            return False
        return not outcome or (event.outcome == "OK") == (outcome == "OK")

    kept: list[AuditEvent] = []
    after: int | None = None
    while page := broker.audit(queue=queue or None, after=after, limit=AUDIT_PAGE):
        kept = (kept + [e for e in page if matches(e)])[-limit:]
        after = page[-1].event_id
    return list(reversed(kept))
