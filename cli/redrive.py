"""Dead-letter redrive: ``durableq redrive`` runs a message move task with progress;
``durableq moves list|cancel`` shows and stops tasks."""

from __future__ import annotations

import click

import durableq

from .base import CommandFailed, management, open_broker, speaks
from .output import Progress, emit, json_option, progress, table

#: Statuses of a task that has not ended yet.
ACTIVE = ("RUNNING", "CANCELLING")
#: Seconds between progress reads while a task runs.
POLL = 0.1
#: The codes of the error line when the task did not complete.
MOVE_FAILED = "MessageMoveFailed"
MOVE_CANCELLED = "MessageMoveCancelled"


@click.command()
@click.argument("dlq")
@click.option("--to", "destination", help="Move to this queue instead of the queues the messages came from.")
@click.option("--rate", type=int, help="Move at most this many messages per second (default: no limit).")
@json_option
@speaks(max_per_second="--rate", destination="--to")
@management("StartMessageMoveTask", "dlq")
def redrive(dlq: str, destination: str | None, rate: int | None, as_json: bool) -> None:
    """Move the messages of dead-letter queue DLQ back to the queues they came from
    (or --to another queue), showing progress.

    The move runs in this process, so the command waits until it is done;
    Ctrl-C cancels it (messages already moved stay moved; run it again for the
    rest). Moved messages arrive as new ones (receive count 0).

    \b
      durableq redrive jobs-dlq
      durableq redrive jobs-dlq --to jobs-retry --rate 50
    """
    broker = open_broker()
    task = broker.start_message_move(dlq, destination=destination, max_per_second=rate)
    with progress(task.to_move, f"moving from {dlq}", enabled=not as_json) as bar:
        task = _follow(broker, task, bar)
    target = task.destination or "the queues they came from"
    text = f"{task.status}: moved {task.moved} of {task.to_move} messages from {dlq} to {target}"
    emit(as_json, task, text)
    if task.status == "FAILED":
        raise CommandFailed(MOVE_FAILED, f"the message move task failed: {task.failure_reason}")
    if task.status == "CANCELLED":
        raise CommandFailed(
            MOVE_CANCELLED,
            f"the message move task was cancelled; run `durableq redrive {dlq}` to move the rest",
        )


def _follow(broker: durableq.Broker, task: durableq.MoveTask, bar: Progress) -> durableq.MoveTask:
    """Wait for a task to end, advancing the bar; the first Ctrl-C cancels it, a second one quits."""
    cancelled = False
    while task.status in ACTIVE:
        try:
            broker.wait_for_message_move(task.task_handle, timeout=POLL)
        except KeyboardInterrupt:
            if cancelled:
                raise
            cancelled = True
            try:
                broker.cancel_message_move(task.task_handle)
            except durableq.InvalidParameterValue:
                pass  # it ended meanwhile; the next read says how
        before = task.moved
        task = _current(broker, task)
        bar.update(task.moved - before)
    return task


def _current(broker: durableq.Broker, task: durableq.MoveTask) -> durableq.MoveTask:
    return next(t for t in broker.list_message_moves(task.source) if t.task_handle == task.task_handle)


@click.group()
def moves() -> None:
    """List and cancel message move tasks (dead-letter redrives)."""


@moves.command("list")
@click.argument("dlq")
@json_option
def list_moves(dlq: str, as_json: bool) -> None:
    """List the message move tasks of dead-letter queue DLQ, newest first.

    \b
      durableq moves list jobs-dlq
    """
    tasks = open_broker().list_message_moves(dlq)
    headers = ("task handle", "status", "moved", "to move", "destination", "rate/s", "started", "failure")
    rows = [
        (
            t.task_handle,
            t.status,
            t.moved,
            t.to_move,
            t.destination,
            t.max_per_second,
            t.started_at,
            t.failure_reason,
        )
        for t in tasks
    ]
    emit(as_json, tasks, lambda: table(headers, rows) if rows else "no message move tasks")


@moves.command("cancel")
@click.argument("task_handle")
@json_option
@management("CancelMessageMoveTask")
def cancel_move(task_handle: str, as_json: bool) -> None:
    """Cancel a running message move task (it stops after its current batch).

    \b
      durableq moves cancel 1b4e28ba-2fa1-11d2-883f-0016d3cca427
    """
    task = open_broker().cancel_message_move(task_handle)
    text = f"{task.status}: task {task.task_handle} of {task.source} stops after its current batch"
    emit(as_json, task, text)


COMMANDS = [redrive, moves]
