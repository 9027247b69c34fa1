"""``durableq audit`` and ``durableq events``: the two event trails, read oldest first — the audit
trail of management calls (who created, changed, purged, deleted) and a queue's message history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click

import durableq
from durableq import limits

from .base import open_broker, open_queue
from .output import emit, json_option, table, when
from .parsing import UTC_TIME, check_range

F = TypeVar("F", bound=Callable[..., Any])


def reader_options(command: F) -> F:
    """--since, --after, --limit and --json: how both trails are read."""
    options = [
        click.option(
            "--since",
            type=UTC_TIME,
            help="Only events at or after this time: ISO 8601 (UTC unless it has an offset) "
            "or ago (30m, 2h, 7d).",
        ),
        click.option(
            "--after", type=int, metavar="EVENT_ID", help="Only events after this one (to resume a reader)."
        ),
        click.option(
            "--limit",
            type=int,
            default=limits.DEFAULT_EVENT_LIMIT,
            show_default=True,
            help=f"At most this many events, 1-{limits.MAX_EVENT_LIMIT:,}.",
        ),
        json_option,
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _check(after: int | None, limit: int) -> None:
    check_range("--limit", limit, 1, limits.MAX_EVENT_LIMIT, "events")
    if after is not None:
        check_range("--after", after, 0, limits.MAX_EVENT_ID, "(an event id)")


@click.command()
@click.option("--queue", "queue", metavar="QUEUE", help="Only the calls on this queue.")
@reader_options
def audit(queue: str | None, since: datetime | None, after: int | None, limit: int, as_json: bool) -> None:
    """Show the audit trail, oldest first: every management call (create, delete, attributes,
    purge, tags, permissions, message move tasks) with its time, process id, OS user, queue and
    outcome (OK, or the error's code). Message calls (send, receive, delete) are not in it: they
    are in the message history of queues that keep one (`durableq events`).

    \b
      durableq audit
      durableq audit --queue orders --since 7d --json
    """
    _check(after, limit)
    events = open_broker().audit(queue=queue, since=since, after=after, limit=limit)
    emit(as_json, events, lambda: _audit_text(events))


@click.command()
@click.argument("queue")
@reader_options
def events(queue: str, since: datetime | None, after: int | None, limit: int, as_json: bool) -> None:
    """Show a queue's message history, oldest first: each message's sent, received,
    visibility_changed, deleted, moved_to_dead_letter, moved_out, moved_in, expired and purged
    events with its receive count. Kept only by queues with history on
    (`queue create --history`, or `queue set QUEUE history=true`).

    \b
      durableq events jobs
      durableq events jobs --since 1h --json
    """
    _check(after, limit)
    found = open_queue(queue).events(since=since, after=after, limit=limit)
    emit(as_json, found, lambda: _events_text(found))


def _audit_text(found: list[durableq.AuditEvent]) -> str:
    if not found:
        return "no audit events"
    return table(
        ["id", "time", "action", "queue", "outcome", "user", "pid", "detail"],
        [
            [e.event_id, when(e.at), e.action, e.queue or "-", e.outcome, e.user, e.pid, _detail(e.detail)]
            for e in found
        ],
    )


def _events_text(found: list[durableq.MessageEvent]) -> str:
    if not found:
        return "no message events (is the queue's history on? `durableq queue show`)"
    return table(
        ["id", "time", "event", "message_id", "receives", "other_queue"],
        [
            [e.event_id, when(e.at), e.event, e.message_id, e.receive_count, e.other_queue or "-"]
            for e in found
        ],
    )


def _detail(detail: dict[str, object]) -> str:
    return " ".join(f"{key}={value}" for key, value in detail.items()) or "-"


COMMANDS = [audit, events]
