"""``durableq schedule ...`` (create, list, show, update, delete, pause, resume) and ``durableq
scheduler``, the process that sends the ticks (a thin shell over ``durableq.Scheduler``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click

import durableq
from durableq import limits

from .base import management, open_broker, speaks
from .output import emit, fields, json_option, preview, table
from .parsing import ATTRIBUTE, UTC_TIME
from .worker import configure_logging

F = TypeVar("F", bound=Callable[..., Any])

#: The option of each library keyword, for the library's error messages.
WORDS = {
    "timezone": "--timezone",
    "start": "--start",
    "end": "--end",
    "flexible_window": "--flexible-window",
    "catch_up": "--catch-up",
    "attributes": "--attr",
}


@click.group()
def schedule() -> None:
    """Create, list, show, change, pause, resume and delete schedules (messages sent on a
    timetable; `durableq scheduler` sends them)."""


def _timing_options(command: F) -> F:
    """The options of `schedule create` and `schedule update` beside the arguments."""
    options = [
        click.option(
            "--attr",
            "attrs",
            multiple=True,
            type=ATTRIBUTE,
            help="An attribute of each message: NAME=VALUE or NAME:TYPE=VALUE. Repeatable.",
        ),
        click.option(
            "--timezone",
            metavar="ZONE",
            help="The IANA time zone cron(...) and at(...) are read in (default UTC).",
        ),
        click.option(
            "--start",
            type=UTC_TIME,
            help="No tick before this time (ISO 8601; UTC without an offset); a rate counts from it.",
        ),
        click.option("--end", type=UTC_TIME, help="No tick after this time."),
        click.option(
            "--flexible-window",
            type=int,
            metavar="SECONDS",
            help="Send each tick at a random "
            f"time up to this long after it, 0-{limits.MAX_FLEXIBLE_WINDOW} (default 0).",
        ),
        click.option(
            "--catch-up",
            type=click.Choice(limits.CATCH_UP_MODES),
            help="Ticks missed while no "
            "scheduler ran: one send for the latest, each one, or none (default latest).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _given(attrs: tuple[tuple[str, durableq.Attribute], ...], **options: Any) -> dict[str, Any]:
    given = {key: value for key, value in options.items() if value is not None}
    if attrs:
        given["attributes"] = dict(attrs)
    return given


@schedule.command()
@click.argument("name")
@click.argument("queue")
@click.argument("expression")
@click.argument("body")
@_timing_options
@click.option("--paused", is_flag=True, help="Create it paused (`schedule resume` starts it).")
@json_option
@speaks(**WORDS)
@management("CreateSchedule")
def create(
    name: str,
    queue: str,
    expression: str,
    body: str,
    attrs: tuple[tuple[str, durableq.Attribute], ...],
    paused: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Send BODY to QUEUE at each tick of EXPRESSION: rate(5 minutes), rate(10 seconds),
    cron(0 12 ? * MON-FRI *) (EventBridge's six fields), at(2026-12-01T10:00:00), or a five-field
    cron line. Quote the expression for the shell.

    \b
      durableq schedule create nightly jobs 'cron(0 2 * * ? *)' '{"task": "report"}' --timezone Europe/Paris
      durableq schedule create heartbeat jobs 'rate(30 seconds)' ping
      durableq schedule create launch jobs 'at(2026-12-01T10:00:00)' go --attr kind=launch
    """
    created = open_broker(create=True).create_schedule(
        name, queue, expression, body, enabled=not paused, **_given(attrs, **options)
    )
    emit(as_json, created, f"schedule {name}: next tick {_next(created)}")


def _next(found: durableq.Schedule) -> str:
    if not found.enabled:
        return "none (paused)"
    return "none left" if found.next_fire is None else _when(found.next_fire)


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


@schedule.command("list")
@click.option("--prefix", default="", help="Only schedules whose name starts with this.")
@json_option
def list_schedules(prefix: str, as_json: bool) -> None:
    """List the schedules, with their expression, queue and next tick.

    \b
      durableq schedule list
    """
    found = open_broker().list_schedules(prefix)
    rows = [(s.name, s.expression, s.queue, _next(s)) for s in found]
    emit(
        as_json,
        found,
        lambda: table(("name", "expression", "queue", "next tick"), rows) if rows else "no schedules",
    )


@schedule.command()
@click.argument("name")
@json_option
def show(name: str, as_json: bool) -> None:
    """Show a schedule: its definition, its next tick and its last tick sent.

    \b
      durableq schedule show nightly
    """
    found = open_broker().get_schedule(name)
    emit(as_json, found, lambda: _text(found))


def _text(found: durableq.Schedule) -> str:
    attributes = ", ".join(f"{k}={a.value!r}" for k, a in sorted(found.attributes.items())) or "-"
    return fields(
        [
            ("name", found.name),
            ("queue", found.queue),
            ("expression", found.expression),
            ("time zone", found.timezone),
            ("body", preview(found.body)),
            ("attributes", attributes),
            ("start", found.start),
            ("end", found.end),
            ("flexible window", f"{found.flexible_window} s"),
            ("catch up", found.catch_up),
            ("state", "enabled" if found.enabled else "paused"),
            ("next tick", _next(found)),
            ("last tick sent", found.last_fire),
        ]
    )


@schedule.command()
@click.argument("name")
@click.option("--queue", help="Send to this queue instead.")
@click.option("--expression", help="A new timetable.")
@click.option("--body", help="A new body.")
@_timing_options
@json_option
@speaks(**WORDS)
@management("UpdateSchedule")
def update(
    name: str, attrs: tuple[tuple[str, durableq.Attribute], ...], as_json: bool, **options: Any
) -> None:
    """Change a schedule's settings (those given; --attr replaces all its attributes).

    \b
      durableq schedule update nightly --expression 'cron(30 2 * * ? *)'
    """
    changed = open_broker().update_schedule(name, **_given(attrs, **options))
    emit(as_json, changed, f"schedule {name} updated: next tick {_next(changed)}")


def _switch(name: str, enabled: bool, as_json: bool) -> None:
    changed = open_broker().update_schedule(name, enabled=enabled)
    emit(
        as_json, changed, f"schedule {name} {'resumed' if enabled else 'paused'}: next tick {_next(changed)}"
    )


@schedule.command()
@click.argument("name")
@json_option
@management("UpdateSchedule")
def pause(name: str, as_json: bool) -> None:
    """Pause a schedule: no tick is sent until `schedule resume`."""
    _switch(name, False, as_json)


@schedule.command()
@click.argument("name")
@json_option
@management("UpdateSchedule")
def resume(name: str, as_json: bool) -> None:
    """Resume a paused schedule from its next tick after now (the paused ones are not caught up)."""
    _switch(name, True, as_json)


@schedule.command()
@click.argument("name")
@json_option
@management("DeleteSchedule")
def delete(name: str, as_json: bool) -> None:
    """Delete a schedule (the messages it sent stay in their queue)."""
    open_broker().delete_schedule(name)
    emit(as_json, {"name": name, "deleted": True}, f"deleted schedule {name}")


@click.command()
@click.option(
    "--poll-interval",
    type=float,
    default=limits.SCHEDULER_POLL_INTERVAL,
    show_default=True,
    help="Seconds between looks for new or changed schedules (it wakes for each known tick anyway).",
)
@click.option(
    "--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]), default="INFO", show_default=True
)
@json_option
@speaks(poll_interval="--poll-interval")
def scheduler(poll_interval: float, log_level: str, as_json: bool) -> None:
    """Send the ticks of every schedule as they come due, until Ctrl-C or SIGTERM. Any number may run
    on one database: each tick is claimed and sent in one transaction, so it is sent exactly once.
    Each send is one log line on stderr (with --json, one JSON object).

    \b
      durableq scheduler
      durableq --db postgresql://app@db/app scheduler --log-level WARNING
    """
    root = logging.getLogger()
    level = root.level
    output = configure_logging(log_level, as_json)
    try:
        durableq.Scheduler(open_broker(), poll_interval=poll_interval).run()
    finally:
        root.removeHandler(output)
        root.setLevel(level)


COMMANDS = [schedule, scheduler]
