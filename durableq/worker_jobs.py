"""A worker's jobs: a message a handler works on, and what the worker does with it when the handler
ends (delete it, or send the reply and delete it; retry it after a back-off; release it at once for the
dead-letter queue), with the log line that says so."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import DurableQError
from .queue import Queue
from .transaction import Transaction
from .types import Message, RedrivePolicy
from .virtual import VirtualQueue

log = logging.getLogger("durableq.worker")  # the worker's own lines, wherever they are written


@dataclass
class Job:
    """A message a handler works on, and what the worker knows of it."""

    message: Message
    extended_at: float = field(default_factory=time.monotonic)
    capped: bool = False  # its visibility reached the 12-hour cap of its receive: no more heartbeats
    lost: bool = False  # another consumer has the message now: never delete it
    released: bool = False  # the worker gave it back at stop: the handler's outcome no longer counts
    settling: bool = False  # the handler returned; its message is being deleted or retried


def settle(
    queue: Queue | VirtualQueue,
    job: Job | None,
    message: Message,
    took: float,
    failure: BaseException | None,
    result: Any,
    *,
    respond: bool,
    backoff: Callable[[int], int],
) -> None:
    """Settle ``message`` whose handler ended ``took`` seconds after it started: delete it (with
    ``respond``: send ``result`` to its reply queue and delete it), or after ``failure`` retry it
    after ``backoff(receive count)`` seconds, or release it at once when its next receive moves it
    to the dead-letter queue.  A job the worker released at stop, or whose message another
    consumer holds now, is left alone."""
    if job is None or job.released:
        log.warning(
            "job %s finished after the worker released it; left for another consumer",
            message.message_id,
            extra=outcome(message, "released", took),
        )
        return
    if job.lost:
        log.warning(
            "job %s finished, but another consumer holds the message now: not deleted",
            message.message_id,
            extra=outcome(message, "lost", took),
        )
        return
    try:
        if failure is None:
            if respond:
                queue.respond(message, result)
            else:
                queue.delete(message.receipt_handle)
            log.info("job %s done in %.3f s", message.message_id, took, extra=outcome(message, "done", took))
        else:
            policy = queue.dead_letter_due(message)
            if policy is not None:
                _dead_letter(queue, message, took, failure, policy)
                return
            delay = backoff(message.receive_count)
            queue.change_visibility(message.receipt_handle, delay)
            log.warning(
                "job %s failed in %.3f s (receive %d): %s: %s; retry in %d s",
                message.message_id,
                took,
                message.receive_count,
                type(failure).__name__,
                failure,
                delay,
                extra=outcome(
                    message, "failed", took, error=f"{type(failure).__name__}: {failure}", retry_in=delay
                ),
            )
    except DurableQError as exc:
        log.error("job %s: could not settle the message: %s", message.message_id, exc)


def acknowledge(queue: Queue | VirtualQueue, message: Message, transaction: Transaction) -> None:
    """A transactional job's delete, inside the handler's transaction.  It first extends the
    message's visibility by its receipt, which must be the message's latest and in flight (on a
    standard queue too, where a delete alone accepts any handle it ever had): if the message's
    visibility timeout ended and another consumer received it, this raises, and the handler's writes
    roll back with it; if the other consumer's transaction committed first, the message is gone and
    this raises too.  So the handler's database writes commit once per message."""
    queue.extend_visibility(message.receipt_handle, 1, transaction=transaction)
    queue.delete(message.receipt_handle, transaction=transaction)


def done(message: Message, took: float) -> None:
    log.info("job %s done in %.3f s", message.message_id, took, extra=outcome(message, "done", took))


def rolled_back(message: Message, took: float, error: BaseException) -> None:
    log.warning(
        "job %s finished, but its delete failed (%s): the handler's transaction rolled back",
        message.message_id,
        error,
        extra=outcome(message, "lost", took, error=f"{type(error).__name__}: {error}"),
    )


def _dead_letter(
    queue: Queue | VirtualQueue, message: Message, took: float, failure: BaseException, policy: RedrivePolicy
) -> None:
    """A failure on the last receive the redrive policy allows: the next receive moves the
    message to the dead-letter queue, so it is released at once instead of after a back-off."""
    queue.change_visibility(message.receipt_handle, 0)
    error = f"{type(failure).__name__}: {failure}"
    log.error(
        "job %s failed in %.3f s on its last allowed receive (%d of %d): %s; "
        "it moves to dead-letter queue %s",
        message.message_id,
        took,
        message.receive_count,
        policy.max_receive_count,
        error,
        policy.dead_letter_queue,
        extra=outcome(
            message, "dead-lettered", took, error=error, dead_letter_queue=policy.dead_letter_queue
        ),
    )


def outcome(message: Message, outcome: str, seconds: float, **more: Any) -> dict[str, Any]:
    """Fields of a job's log line, for log handlers that keep structure (``durableq worker --json``)."""
    return {
        "job": {
            "message_id": message.message_id,
            "outcome": outcome,
            "seconds": round(seconds, 6),
            "receive_count": message.receive_count,
            **more,
        }
    }
