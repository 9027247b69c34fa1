"""The rarer calls of the mix: workers, temporary queues, a second broker, the payload sweep,
dead-letter queues that come and go, forks and short-lived threads.

Each carries its own promise: a ``Worker`` over a checked queue journals every
call it makes (and its ERROR log lines are failures, see :mod:`.role`); a
worker whose handler always fails, on a queue whose redrive policy names a
dead-letter queue the mix deletes and creates again, never handles one
message over and over within its back-off; a ``Worker(processes=True)`` on an
encrypted queue handles its messages in children that have the keyring; a
closed broker answers ``BrokerClosed``; a broker without the keyring cannot
send to an encrypted queue.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import durableq

from .. import store
from ..journal import Journal
from ..journaled import JournaledQueue
from . import layout
from .caller import pick

#: A spin: one message handled this often within one short run whose back-off is 30 s.
SPIN_LIMIT = 3


class WorkerQueue(JournaledQueue):
    """A JournaledQueue that also takes the worker's heartbeats (journaled as changes of visibility)."""

    def extend_visibility(self, receipt_handle: str, timeout: int) -> int:
        self._journal.write("cv-intent", q=self.name, id=None, h=receipt_handle, to=timeout, b=_now())
        granted, _, _ = self._call(
            "change_visibility",
            lambda: self._queue.extend_visibility(receipt_handle, timeout),
            h=receipt_handle,
        )
        self._journal.write("cv-done", q=self.name, id=None, h=receipt_handle, a=_now())
        return granted


def _now() -> float:
    import time

    return time.time()


def one(hand: Any) -> None:
    table = [
        (3.0, lambda: worker_run(hand)),
        (2.0, lambda: spin_worker(hand)),
        (hand.proc.config.get("process_workers", 0.3), lambda: process_worker(hand)),
        (3.0, lambda: temporary(hand)),
        (1.0, lambda: second_broker(hand)),
        (1.0, lambda: keyless(hand)),
        (2.0, lambda: sweep(hand)),
        (2.0, lambda: dead_letter_queue_flip(hand)),
        (4.0, lambda: hand.proc.fork(hand)),
        (8.0, lambda: hand.proc.short_thread(hand)),
    ]
    if not store.on_postgres(hand.proc.db):
        table.append((0.3, lambda: backup(hand)))
    pick(hand.rng, table)()


def _stop_after(runner: durableq.Worker, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, runner.stop)
    timer.daemon = True
    timer.start()
    return timer


def worker_run(hand: Any) -> None:
    """A thread-mode Worker over a checked queue for about a second; every call it makes is journaled."""
    name = hand.rng.choice([layout.STANDARD, layout.FIFO, layout.BIG])
    queue = WorkerQueue(hand.broker.get_queue(name), hand.journal, layout.VISIBILITY)
    runner = durableq.Worker(
        queue,  # type: ignore[arg-type]  # duck-typed: journals every call the worker makes
        lambda message: message.body,
        concurrency=hand.rng.randint(1, 3),
        visibility_timeout=layout.VISIBILITY,
        wait_time=1,
        grace_period=1,
    )
    timer = _stop_after(runner, hand.rng.uniform(0.3, 1.5))
    hand.call("worker.run", runner.run, judged=True)
    timer.cancel()


def spin_worker(hand: Any) -> None:
    """A worker whose handler always fails, on ``spin`` (dead-letters after one receive)."""
    queue = hand.broker.get_queue(layout.SPIN)
    hand.call("spin.send", lambda: queue.send(f"{hand.tag}.spin"))
    handled: Counter[str] = Counter()

    def fail(message: durableq.Message) -> None:
        handled[message.message_id] += 1
        raise RuntimeError("this handler always fails")

    runner = durableq.Worker(
        queue,
        fail,
        concurrency=1,
        visibility_timeout=layout.VISIBILITY,
        wait_time=1,
        backoff=lambda n: 30,
        grace_period=0.5,
    )
    timer = _stop_after(runner, 1.5)
    hand.call("spin.worker", runner.run)
    timer.cancel()
    worst = max(handled.values(), default=0)
    hand.check(
        "spin.worker",
        worst <= SPIN_LIMIT,
        f"a worker with a 30-s back-off handled one message {worst} times in 1.5 s (queue {layout.SPIN!r}, "
        f"whose redrive policy names {layout.SPIN_DLQ!r}, which the mix deletes and creates again)",
    )


def process_worker(hand: Any) -> None:
    """``Worker(processes=True)`` on an encrypted queue: its children must be able to decrypt."""
    queue = hand.broker.get_queue(layout.SEALED_SCRATCH)
    hand.call("sealed.send", lambda: queue.send("sealed"))
    hand.proc.children += 1
    path = hand.journal.path.with_name(f"{hand.journal.path.stem}.wchild{hand.proc.children}.jsonl")
    runner = durableq.Worker(
        queue,
        child_handler,
        concurrency=1,
        processes=True,
        visibility_timeout=layout.VISIBILITY,
        wait_time=1,
        grace_period=1,
        process_initializer=functools.partial(child_setup, str(path)),
    )
    timer = _stop_after(runner, 3.0)
    hand.call("worker.processes", runner.run)
    timer.cancel()


def child_setup(path: str) -> None:
    """In a worker process: its ERROR log lines are journaled (as in the hostile role itself)."""
    from .role import LogCapture

    logging.getLogger("durableq").addHandler(LogCapture(Journal(path)))


def child_handler(message: durableq.Message) -> None:
    """In a worker process: read the (decrypted) body, and succeed."""
    assert message.body


def temporary(hand: Any) -> None:
    def use() -> None:
        with hand.broker.temporary_queue("hx-tmp", idle_timeout=60) as queue:
            queue.send("temporary")
            for message in queue.receive(1):
                queue.delete(message.receipt_handle)

    hand.call("temporary_queue", use)


def second_broker(hand: Any) -> None:
    """Another broker on the same database, opened, used and closed; then used again."""
    proc = hand.proc
    opened: list[durableq.Queue] = []

    def roundtrip() -> None:
        with durableq.open(proc.db, **proc.options) as other:
            opened.append(other.get_queue(layout.STANDARD))
            other.list_queues()
            opened[0].stats()

    hand.call("open", roundtrip)
    if opened:
        body = f"{hand.body(layout.STANDARD)}.never"
        hand.call("closed.send", lambda: opened[0].send(body), ["BrokerClosed"], fail=True)


def keyless(hand: Any) -> None:
    """A broker without the keyring may not send to an encrypted queue."""
    proc = hand.proc

    def attempt() -> None:
        with durableq.open(proc.db, payload_dir=proc.options["payload_dir"]) as other:
            other.get_queue(layout.SEALED_SCRATCH).send("no key")

    hand.call("keyless.send", attempt, ["KmsAccessDenied"], fail=True)


def sweep(hand: Any) -> None:
    grace = hand.rng.choice([60.0, 3600.0])
    hand.call("sweep_payloads", lambda: hand.broker.sweep_payloads(grace=grace))
    hand.call("reap_idle_queues", hand.broker.reap_idle_queues)


def dead_letter_queue_flip(hand: Any) -> None:
    if hand.rng.random() < 0.5:
        hand.call("delete_queue", lambda: hand.broker.delete_queue(layout.SPIN_DLQ), ["QueueDoesNotExist"])
    else:
        hand.call("create_queue", lambda: hand.broker.create_queue(layout.SPIN_DLQ))


def backup(hand: Any) -> None:
    target = Path(hand.proc.folder) / f"backup-{os.getpid()}-{hand.sent}.db"
    hand.call("backup", lambda: hand.broker.backup(target))
    for suffix in store.SUFFIXES:
        Path(f"{target}{suffix}").unlink(missing_ok=True)
