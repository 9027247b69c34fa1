"""``durableq worker``: run a handler over a queue (a thin shell over ``durableq.Worker``)."""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

import durableq
from durableq import limits
from durableq.text import OneLineFormatter

from .base import CommandFailed, open_broker, open_queue, speaks
from .output import json_option

LOG_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(message)s"


class UtcLines(OneLineFormatter):
    """Log lines whose time is ISO 8601 in UTC, to the millisecond (as every time the CLI prints), one
    line per record whatever a handler's error text holds."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonLines(UtcLines):
    """One JSON object per log record, with the job's outcome fields when the record has them."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "process": record.processName,
            "message": record.getMessage(),
        }
        if hasattr(record, "job"):
            line["job"] = record.job
        return json.dumps(line)


def load_handler(spec: str) -> Callable[[durableq.Message], Any]:
    """The function ``module:function`` names, importable from the current directory too."""
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise click.BadParameter(f"{spec!r} is not module:function (e.g. myapp.jobs:resize)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: handlers live in the user's project
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise CommandFailed(
            "InvalidParameterValue", f"cannot load handler {spec}: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(function):
        raise CommandFailed("InvalidParameterValue", f"handler {spec} is not callable")
    return function  # type: ignore[no-any-return]


@click.command()
@click.argument("queue")
@click.argument("handler")
@click.option(
    "--concurrency",
    type=int,
    default=limits.DEFAULT_CONCURRENCY,
    show_default=True,
    help="Handlers running at once.",
)
@click.option(
    "--processes", is_flag=True, help="Run handlers in --concurrency worker processes instead of threads."
)
@click.option(
    "--visibility-timeout", type=int, help="Seconds a message is hidden per receive (default: the queue's)."
)
@click.option(
    "--heartbeat", type=float, help="Seconds between visibility extensions (default: half the timeout)."
)
@click.option(
    "--wait",
    type=int,
    default=limits.MAX_RECEIVE_WAIT_TIME,
    show_default=True,
    help="Long-poll wait of each receive, in seconds.",
)
@click.option(
    "--grace-period",
    type=float,
    default=limits.DEFAULT_GRACE_PERIOD,
    show_default=True,
    help="Seconds running handlers get at stop.",
)
@click.option(
    "--idle-timeout", type=float, help="Stop after this many seconds without messages (default: never)."
)
@click.option(
    "--respond",
    is_flag=True,
    help="QUEUE holds requests (`durableq call`, durableq.rpc): send HANDLER's return value, a str, "
    "as the reply, in the transaction that deletes the request.",
)
@click.option(
    "--transactional",
    is_flag=True,
    help="Call HANDLER as handler(message, transaction): its writes through the transaction commit "
    "with the message's delete, in one commit (durableq.Worker(transactional=True)).",
)
@click.option(
    "--schedules",
    is_flag=True,
    help="Also send the ticks of the database's schedules, as `durableq scheduler` does (each is sent "
    "once however many workers and schedulers run).",
)
@click.option(
    "--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]), default="INFO", show_default=True
)
@json_option
@speaks(
    concurrency="--concurrency",
    visibility_timeout="--visibility-timeout",
    heartbeat_interval="--heartbeat",
    wait_time="--wait",
    grace_period="--grace-period",
    idle_timeout="--idle-timeout",
)
def worker(
    queue: str,
    handler: str,
    concurrency: int,
    processes: bool,
    visibility_timeout: int | None,
    heartbeat: float | None,
    wait: int,
    grace_period: float,
    idle_timeout: float | None,
    respond: bool,
    transactional: bool,
    schedules: bool,
    log_level: str,
    as_json: bool,
) -> None:
    """Run HANDLER (module:function) on the messages of QUEUE until Ctrl-C or SIGTERM.

    A message whose handler returns is deleted; one whose handler raises is
    retried after a back-off, and goes to the dead-letter queue after the
    queue's maximum receives. Long jobs are kept invisible by a heartbeat.
    Stopping lets running handlers finish within the grace period and makes
    unfinished messages visible again at once. Each job's outcome is one log
    line on stderr (with --json, one JSON object with the job's fields).

    \b
      durableq worker thumbnails myapp.jobs:make_thumbnail --concurrency 4
      durableq worker thumbnails myapp.jobs:make_thumbnail --processes --concurrency 2
      durableq worker resize myapp.jobs:resize --respond
      durableq worker orders myapp.jobs:ship --transactional
      durableq worker jobs myapp.jobs:run --schedules
    """
    function = load_handler(handler)
    root = logging.getLogger()
    level = root.level
    output = configure_logging(log_level, as_json)
    target = open_queue(queue)
    scheduler = _scheduler_thread() if schedules else None
    try:
        durableq.Worker(
            target,
            function,
            concurrency=concurrency,
            processes=processes,
            visibility_timeout=visibility_timeout,
            heartbeat_interval=heartbeat,
            wait_time=wait,
            grace_period=grace_period,
            idle_timeout=idle_timeout,
            process_initializer=functools.partial(configure_logging, log_level, as_json),
            respond=respond,
            transactional=transactional,
        ).run()
    finally:  # leave logging as it was (this matters when the CLI runs inside another program)
        if scheduler is not None:
            scheduler[0].stop()
            scheduler[1].join()
        root.removeHandler(output)
        root.setLevel(level)


def _scheduler_thread() -> tuple[durableq.Scheduler, threading.Thread]:
    """A scheduler beside the worker, in a thread of its own (the worker's signals stop both)."""
    scheduler = durableq.Scheduler(open_broker())
    thread = threading.Thread(target=scheduler.run, name="durableq-scheduler", daemon=True)
    thread.start()
    return scheduler, thread


def configure_logging(level: str, as_json: bool) -> logging.Handler:
    """Log to stderr, one line per record (this process, or a worker process it starts)."""
    output = logging.StreamHandler(sys.stderr)
    output.setFormatter(JsonLines() if as_json else UtcLines(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(output)
    root.setLevel(level)
    return output


COMMANDS = [worker]
