"""``durableq stats``: depth by state, the oldest message's age and per-minute rates;
``--watch`` redraws them in place until Ctrl-C."""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import click

import durableq
from durableq import limits
from durableq.types import MESSAGE_STATES

from .base import open_broker
from .output import duration, emit, json_option, table
from .parsing import check_range

#: Counters of ``Queue.metrics``, and their column headings.
RATES = {
    "sent": "sent/min",
    "received": "recv/min",
    "deleted": "del/min",
    "moved_to_dead_letter": "dlq/min",
    "expired": "expired/min",
    "empty_receives": "empty/min",
}

# Indirection so a test can end --watch without waiting.
_sleep = time.sleep


@click.command()
@click.argument("queue", required=False)
@click.option(
    "--window",
    type=int,
    default=limits.DEFAULT_STATS_WINDOW,
    show_default=True,
    help="Minutes the per-minute rates are averaged over (the current minute counts), "
    f"1-{limits.MAX_STATS_WINDOW}.",
)
@click.option("--watch", is_flag=True, help="Redraw every --interval seconds until Ctrl-C.")
@click.option(
    "--interval",
    type=float,
    default=limits.DEFAULT_WATCH_INTERVAL,
    show_default=True,
    help=f"Seconds between redraws, {limits.MIN_WATCH_INTERVAL:g}-{limits.MAX_WATCH_INTERVAL}.",
)
@json_option
def stats(queue: str | None, window: int, watch: bool, interval: float, as_json: bool) -> None:
    """Show the depth of a queue (or of every queue) by state, its oldest message's
    age, and per-minute rates of sends, receives, deletes, dead letters, expiries
    and empty receives.

    With --watch, the table is redrawn in place (with --json: one JSON line per
    refresh) until Ctrl-C, which exits cleanly.

    \b
      durableq stats
      durableq stats jobs --watch --interval 1
    """
    check_range("--window", window, 1, limits.MAX_STATS_WINDOW, "minutes")
    check_range("--interval", interval, limits.MIN_WATCH_INTERVAL, limits.MAX_WATCH_INTERVAL, "seconds")
    broker = open_broker()
    try:
        while True:
            snapshot = _snapshot(broker, queue, window)
            if watch and not as_json:
                click.clear()
            emit(as_json, snapshot, functools.partial(_text, snapshot))
            if not watch:
                return
            if not as_json:
                click.echo(f"\nevery {interval:g} s; Ctrl-C to stop")
            _sleep(interval)
    except KeyboardInterrupt:
        if not watch:
            raise
        # Ctrl-C is how --watch ends: a clean exit 0.


def _snapshot(broker: durableq.Broker, queue: str | None, window: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    rows = []
    for name in [queue] if queue else broker.list_queues():
        try:
            rows.append(_queue_row(broker.get_queue(name), now - timedelta(minutes=window), window))
        except durableq.QueueDoesNotExist:
            if queue:
                raise
            # Deleted since the listing: it has no stats to show.
    return {"at": now, "window_minutes": window, "queues": rows}


def _queue_row(target: durableq.Queue, since: datetime, window: int) -> dict[str, Any]:
    depth = target.stats()
    minutes = target.metrics(since=since)
    return {
        "queue": target.name,
        "fifo": target.fifo,
        **{state.name: getattr(depth, state.count) for state in MESSAGE_STATES},
        "oldest_message_age": depth.oldest_message_age,
        "per_minute": {key: round(sum(getattr(m, key) for m in minutes) / window, 1) for key in RATES},
    }


def _text(snapshot: dict[str, Any]) -> str:
    rows = snapshot["queues"]
    if not rows:
        return "no queues"
    states = [state.name.replace("_", " ") for state in MESSAGE_STATES]
    headers = ["queue", *states, "oldest", *RATES.values()]
    lines = [
        [
            r["queue"],
            *(r[state.name] for state in MESSAGE_STATES),
            duration(r["oldest_message_age"]),
            *(r["per_minute"][key] for key in RATES),
        ]
        for r in rows
    ]
    return table(headers, lines)


COMMANDS = [stats]
