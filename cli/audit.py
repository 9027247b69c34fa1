"""``durableq audit``: the audit trail of management calls (who created, changed, purged, deleted)."""

from __future__ import annotations

from datetime import datetime

import click

import durableq
from durableq import limits

from .base import open_broker
from .output import emit, json_option, table, when
from .parsing import UTC_TIME, check_range


@click.command()
@click.option("--queue", "queue", metavar="QUEUE", help="Only the calls on this queue.")
@click.option(
    "--since",
    type=UTC_TIME,
    help="Only calls at or after this time: ISO 8601 (UTC unless it has an offset) or ago (30m, 2h, 7d).",
)
@click.option(
    "--after", type=int, metavar="EVENT_ID", help="Only events after this one (to resume a reader)."
)
@click.option(
    "--limit",
    type=int,
    default=limits.DEFAULT_EVENT_LIMIT,
    show_default=True,
    help=f"At most this many events, 1-{limits.MAX_EVENT_LIMIT:,}.",
)
@json_option
def audit(queue: str | None, since: datetime | None, after: int | None, limit: int, as_json: bool) -> None:
    """Show the audit trail, oldest first: every management call (create, delete, attributes,
    purge, tags, permissions, message move tasks) with its time, process id, OS user, queue and
    outcome (OK, or the error's code). Message calls (send, receive, delete) are not in it.

    \b
      durableq audit
      durableq audit --queue orders --since 7d --json
    """
    check_range("--limit", limit, 1, limits.MAX_EVENT_LIMIT, "events")
    if after is not None:
        check_range("--after", after, 0, limits.MAX_EVENT_ID, "(an event id)")
    events = open_broker().audit(queue=queue, since=since, after=after, limit=limit)
    emit(as_json, events, lambda: _text(events))


def _text(events: list[durableq.AuditEvent]) -> str:
    if not events:
        return "no audit events"
    return table(
        ["id", "time", "action", "queue", "outcome", "user", "pid", "detail"],
        [
            [e.event_id, when(e.at), e.action, e.queue or "-", e.outcome, e.user, e.pid, _detail(e.detail)]
            for e in events
        ],
    )


def _detail(detail: dict[str, object]) -> str:
    return " ".join(f"{key}={value}" for key, value in detail.items()) or "-"


COMMANDS = [audit]
