"""``Worker``: runs a handler over a queue, the way SQS leaves users to write themselves.

A message whose handler returns is deleted; one whose handler raises is left for a retry after a
back-off (through its visibility timeout), and the queue's redrive policy moves it to the
dead-letter queue after its maximum receives (the library's rule, asked with
``Queue.dead_letter_due``: the worker keeps no copy of it).  While a handler runs, a heartbeat
extends the message's visibility so that a long job is not handed to another consumer.  Stopping
(``stop()``, SIGINT or SIGTERM) stops receiving, lets running handlers finish within a grace
period, and makes what is unfinished visible again at once.  A worker killed outright loses
nothing either: its messages come back when their visibility timeout ends.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from . import limits, stop_signals, validation, worker_jobs, worker_processes
from . import transaction as transactions
from .errors import BrokerClosed, DurableQError, InvalidParameterValue, QueueDoesNotExist
from .queue import Queue
from .types import Message
from .virtual import VirtualQueue
from .worker_jobs import Job

log = logging.getLogger(__name__)

#: handler(message), or handler(message, transaction) for a transactional worker.
Handler = Callable[..., Any]
STOP_CHECK = limits.WORKER_STOP_CHECK
DEFAULT_GRACE_PERIOD = limits.DEFAULT_GRACE_PERIOD
MAX_GRACE_PERIOD = limits.MAX_GRACE_PERIOD
MAX_CONCURRENCY = limits.MAX_CONCURRENCY
MAX_BACKOFF = limits.MAX_BACKOFF


def default_backoff(receive_count: int) -> int:
    """Seconds before a failed message is retried: 2, 4, 8 ... capped at 15 minutes."""
    seconds: int = 2 ** min(receive_count, 16)  # a non-negative exponent: an int
    return min(seconds, MAX_BACKOFF)


class Worker:
    """Runs ``handler`` on the messages of ``queue`` until stopped.

    ``concurrency`` handlers run at once, in threads, or in that many worker processes with
    ``processes=True``: those open the database as the queue's broker was opened
    (``Broker.options``: keyring, payload store, busy timeout, clock) and are sent the handler,
    ``backoff``, ``process_initializer`` and the broker's clock pickled, so each must be a
    module-level function (else InvalidParameterValue, here).  ``process_initializer`` runs first
    in each worker process (for example to configure logging there).  ``visibility_timeout``
    defaults to the queue's; the heartbeat extends it every ``heartbeat_interval`` seconds (default:
    half the timeout).  ``backoff(receive_count)`` gives the seconds before a failed message is
    retried.  A failure on the last receive the redrive policy allows is released at once instead:
    its next receive moves it to the dead-letter queue.  If that queue is gone the message stays, as
    in SQS, and is retried after its back-off like any failure (the library logs the missing queue
    once).  With ``idle_timeout``, ``run`` also returns once no message came and none ran for that
    many seconds (batch jobs, demos).  With ``respond`` the queue holds requests
    (:mod:`durableq.rpc`): the handler's return value, a ``str``, is sent to the request's reply
    queue in the same transaction as the delete (``Queue.respond``).  With ``transactional`` the
    handler is called as ``handler(message, transaction)`` inside ``Broker.transaction()``: what it
    writes through the transaction (``transaction.execute``, sends and deletes with
    ``transaction=``) commits in one commit with the message's delete, and an exception rolls both
    back (the message then returns by its back-off and redrive policy, as any failure).  The delete
    requires the worker's receipt to be the message's latest: if the message's visibility timeout
    ended and another consumer received it meanwhile, the transaction rolls back instead, whichever
    of the two finishes first.  So a message's database effects through the transaction commit
    exactly once; effects outside it (e-mails, HTTP calls) may happen more than once.
    """

    def __init__(
        self,
        queue: Queue | VirtualQueue,
        handler: Handler,
        *,
        concurrency: int = limits.DEFAULT_CONCURRENCY,
        visibility_timeout: int | None = None,
        heartbeat_interval: float | None = None,
        wait_time: int = limits.MAX_RECEIVE_WAIT_TIME,
        max_messages: int = limits.MAX_MESSAGES_PER_RECEIVE,
        backoff: Callable[[int], int] = default_backoff,
        processes: bool = False,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        idle_timeout: float | None = None,
        process_initializer: Callable[[], object] | None = None,
        respond: bool = False,
        transactional: bool = False,
    ) -> None:
        if not callable(handler):
            raise InvalidParameterValue("handler must be a callable taking a durableq.Message")
        validation.integer("concurrency", concurrency, 1, MAX_CONCURRENCY, "handlers")
        validation.integer("wait_time", wait_time, 0, limits.MAX_RECEIVE_WAIT_TIME)
        validation.integer("max_messages", max_messages, 1, limits.MAX_MESSAGES_PER_RECEIVE, "messages")
        validation.number("grace_period", grace_period, 0, MAX_GRACE_PERIOD)
        if visibility_timeout is not None:
            validation.integer("visibility_timeout", visibility_timeout, 1, limits.MAX_VISIBILITY_TIMEOUT)
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.visibility_timeout = visibility_timeout or queue.attributes()["visibility_timeout"]
        if self.visibility_timeout < 1:
            raise InvalidParameterValue(
                "the worker needs a visibility timeout of at least 1 s (the queue's is 0)"
            )
        self.heartbeat_interval = heartbeat_interval or max(self.visibility_timeout / 2, 0.5)
        validation.number("heartbeat_interval", self.heartbeat_interval, 0.05, self.visibility_timeout)
        self.wait_time = wait_time
        self.max_messages = max_messages
        self.backoff = backoff
        self.processes = processes
        self.grace_period = grace_period
        if idle_timeout is not None:
            validation.number("idle_timeout", idle_timeout, 0, MAX_GRACE_PERIOD)
        self.idle_timeout = idle_timeout
        self.process_initializer = process_initializer
        self.respond = respond
        if transactional and respond:
            raise InvalidParameterValue(
                "a worker is transactional or a responder, not both (a reply commits with its delete "
                "already: see Queue.respond)"
            )
        self.transactional = transactional
        if processes:
            worker_processes.check_portable(
                queue, handler=handler, backoff=backoff, process_initializer=process_initializer
            )
        self._stop = threading.Event()
        self._stopped_by: str | None = None  # the signal that stopped the worker, if one did
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Condition()

    # -- control -------------------------------------------------------------

    def stop(self) -> None:
        """Stop receiving; ``run`` returns once running handlers finished or the grace period ended."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()

    def _on_signal(self, signum: int) -> None:
        # Only note it here: the loop logs it (logging inside a signal handler could interleave lines).
        self._stopped_by = signal.Signals(signum).name
        self.stop()

    def _log_stop(self, running: int, what: str) -> None:
        reason = f"{self._stopped_by} received" if self._stopped_by else "stop() called"
        log.info("%s: stopping (%s: %d, grace period: %g s)", reason, what, running, self.grace_period)

    def run(self) -> None:
        """Receive and handle messages until ``stop()``, SIGINT or SIGTERM."""
        restore = stop_signals.install(self._on_signal)
        try:
            if self.processes:
                self._run_processes()
            else:
                self._run_threads()
        finally:
            restore()

    # -- threads -------------------------------------------------------------

    def _run_threads(self) -> None:
        heartbeat = threading.Thread(target=self._heartbeat, name="durableq-heartbeat", daemon=True)
        heartbeat.start()
        idle_since = time.monotonic()
        try:
            while not self._stop.is_set():
                if self._idle_for(idle_since):
                    log.info("no message for %s s: stopping", self.idle_timeout)
                    break
                free = self._wait_for_a_free_slot()
                if free == 0:
                    continue
                try:
                    messages = self.queue.receive(
                        min(free, self.max_messages),
                        visibility_timeout=self.visibility_timeout,
                        wait_time=min(self.wait_time, int(STOP_CHECK)),
                    )
                except (QueueDoesNotExist, BrokerClosed):
                    raise  # retrying cannot help: stop (after the running jobs) and say why
                except DurableQError as exc:
                    log.error(
                        "receive from %s failed: %s; retrying in %s s", self.queue.name, exc, STOP_CHECK
                    )
                    self._stop.wait(STOP_CHECK)
                    continue
                if messages or self._jobs:
                    idle_since = time.monotonic()
                for message in messages:
                    with self._lock:
                        self._jobs[message.receipt_handle] = Job(message)
                    # Daemon threads: a handler still running after the grace period must not
                    # keep the process alive (its message was released for another consumer).
                    threading.Thread(
                        target=self._handle, args=(message,), name="durableq-job", daemon=True
                    ).start()
        finally:
            if self._stop.is_set():
                self._log_stop(len(self._jobs), "running jobs")
            self._drain()
            self._stop.set()
            heartbeat.join()

    def _idle_for(self, since: float) -> bool:
        return (
            self.idle_timeout is not None and not self._jobs and time.monotonic() - since >= self.idle_timeout
        )

    def _wait_for_a_free_slot(self) -> int:
        with self._lock:
            while len(self._jobs) >= self.concurrency and not self._stop.is_set():
                self._lock.wait(STOP_CHECK)
            return 0 if self._stop.is_set() else self.concurrency - len(self._jobs)

    def _handle(self, message: Message) -> None:
        if self.transactional:
            self._handle_in_transaction(message)
            return
        started = time.monotonic()
        try:
            result = self.handler(message)
            if self.respond and not isinstance(result, str):
                raise TypeError(
                    f"a responder's handler must return the reply, a str; got {type(result).__name__}"
                )
        except BaseException as exc:  # noqa: BLE001 - the handler's failure (KeyboardInterrupt too) is the message's
            self._finish(message, started, failure=exc)
        else:
            self._finish(message, started, failure=None, result=result)

    def _handle_in_transaction(self, message: Message) -> None:
        """The handler's writes and the message's delete in one transaction (see the class)."""
        started = time.monotonic()
        handled = False
        try:
            with transactions.begin(self.queue._rt) as tx:
                self.handler(message, tx)
                handled = True
                with self._lock:
                    job = self._jobs.get(message.receipt_handle)
                    if job is None or job.released or job.lost:
                        raise _NotOurs
                    job.settling = True
                worker_jobs.acknowledge(self.queue, message, tx)
        except BaseException as exc:  # noqa: BLE001 - the handler's failure (KeyboardInterrupt too) is the message's
            if handled:  # the handler was done: its acknowledgement failed (another consumer has it)
                worker_jobs.rolled_back(message, time.monotonic() - started, exc)
                self._forget(message)
            else:
                self._finish(message, started, failure=exc)
            return
        worker_jobs.done(message, time.monotonic() - started)
        self._forget(message)

    def _forget(self, message: Message) -> None:
        with self._lock:
            self._jobs.pop(message.receipt_handle, None)
            self._lock.notify_all()

    def _finish(
        self, message: Message, started: float, failure: BaseException | None, result: Any = None
    ) -> None:
        with self._lock:
            job = self._jobs.get(message.receipt_handle)
            if job is not None and not job.released:
                job.settling = True  # from now on the drain waits for it instead of releasing it
        try:
            worker_jobs.settle(
                self.queue,
                job,
                message,
                time.monotonic() - started,
                failure,
                result,
                respond=self.respond,
                backoff=self.backoff,
            )
        finally:
            # Only now does the job leave: a worker that stops never returns between a
            # handler's success and the delete it earned.
            with self._lock:
                self._jobs.pop(message.receipt_handle, None)
                self._lock.notify_all()

    def _heartbeat(self) -> None:
        """Extend the visibility of long-running jobs, never past 12 h from their receive."""
        tick = min(self.heartbeat_interval, STOP_CHECK)
        while not self._stop.wait(tick):
            now = time.monotonic()
            with self._lock:
                due = [
                    j
                    for j in self._jobs.values()
                    if not (j.lost or j.capped) and now - j.extended_at >= self.heartbeat_interval
                ]
            for job in due:
                self._extend(job, now)

    def _extend(self, job: Job, now: float) -> None:
        try:
            granted = self.queue.extend_visibility(job.message.receipt_handle, self.visibility_timeout)
            job.extended_at = now
            if granted < self.visibility_timeout:  # the library's 12-hour cap: no further extension
                job.capped = True
        except DurableQError as exc:
            job.lost = True
            log.warning(
                "job %s: visibility not extended (%s); it will not be deleted", job.message.message_id, exc
            )

    def _drain(self) -> None:
        """Give running handlers the grace period, then release what is left."""
        deadline = time.monotonic() + self.grace_period
        with self._lock:
            while self._jobs and time.monotonic() < deadline:
                self._lock.wait(min(deadline - time.monotonic(), STOP_CHECK))
            unfinished = [j for j in self._jobs.values() if not j.lost and not j.settling]
            for job in unfinished:
                job.released = True
            while any(j.settling for j in self._jobs.values()):
                self._lock.wait(STOP_CHECK)  # one delete or change-visibility each
        for job in unfinished:
            try:
                self.queue.change_visibility(job.message.receipt_handle, 0)
                log.warning(
                    "job %s still running at stop: released for another consumer", job.message.message_id
                )
            except DurableQError as exc:
                log.error("job %s could not be released: %s", job.message.message_id, exc)

    # -- processes -----------------------------------------------------------

    def _run_processes(self) -> None:
        settings = {
            "visibility_timeout": self.visibility_timeout,
            "heartbeat_interval": self.heartbeat_interval,
            "wait_time": self.wait_time,
            "max_messages": 1,
            "backoff": self.backoff,
            "grace_period": self.grace_period,
            "idle_timeout": self.idle_timeout,
            "respond": self.respond,
            "transactional": self.transactional,
        }
        worker_processes.supervise(
            self.concurrency,
            Worker,
            self.queue,
            self.handler,
            settings,
            self.process_initializer,
            self._stop,
            lambda running: self._log_stop(running, "worker processes"),
        )


class _NotOurs(Exception):
    """The worker gave the message up (released at stop, or its visibility was lost) while the
    handler ran: the handler's transaction rolls back."""

    def __str__(self) -> str:
        return "the worker no longer holds the message (released at stop, or its visibility was lost)"
