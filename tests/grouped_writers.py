"""Threads of one process writing to one file at durability "full" (group commit), some of whose
writes fail: run as ``python -m tests.grouped_writers SCENARIO PATH SECONDS`` by
tests/test_group_ownership.py, in a process of its own so that a crash (SIGSEGV) or writers
blocked forever show as an exit code or a timeout, not as a broken test run.

Prints one JSON object: ``acknowledged`` (the message ids of every send that returned, or
future that resolved), ``foreign`` (what a send raised: it must be nothing, its writes are
good) and ``odd`` (anything else that went other than expected).  The test reopens the file
and looks for every acknowledged message.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import durableq

from .grouping import Blocking, Calls, db_of, gate_held, line_up

SENDERS = 4
#: Seconds past a scenario's own that its writers may take to finish, at most.
WATCHDOG = 30


class Outcome:
    """What the threads of a scenario saw (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acknowledged: list[str] = []
        self.foreign: list[str] = []
        self.odd: list[str] = []
        self.batches = 0  # how many shared transactions the gate ran

    def add(self, kind: str, value: str) -> None:
        with self._lock:
            getattr(self, kind).append(value)

    def report(self) -> dict[str, Any]:
        return {
            "acknowledged": self.acknowledged,
            "foreign": self.foreign,
            "odd": self.odd,
            "batches": self.batches,
        }


def _run_threads(targets: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _sender(queue: durableq.Queue, index: int, until: float, out: Outcome) -> Callable[[], None]:
    def send() -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            try:
                out.add("acknowledged", queue.send(f"{index}.{n}").message_id)
            except Exception as exc:  # noqa: BLE001 - a send must not fail here: report it
                out.add("foreign", f"send {index}.{n}: {exc!r}")

    return send


def _fail_one_write(broker: durableq.Broker, queue: durableq.Queue, n: int, out: Outcome) -> None:
    """One write that fails (a bad receipt handle, a queue that does not exist), as a caller's
    mistake would."""
    try:
        if n % 3 == 0:
            queue.change_visibility("not a receipt handle", 5)
        elif n % 3 == 1:
            queue.delete("bad handle")
        else:
            broker.delete_queue("no-such-queue")
    except (durableq.ReceiptHandleIsInvalid, durableq.QueueDoesNotExist):
        return
    except Exception as exc:  # noqa: BLE001
        out.add("odd", f"failing write {n}: {exc!r}")
        return
    out.add("odd", f"failing write {n} succeeded")


def _read(broker: durableq.Broker, queue: durableq.Queue, n: int, out: Outcome) -> None:
    reads: list[Callable[[], object]] = [
        queue.peek,
        broker.list_queues,
        queue.attributes,
        lambda: broker.audit(limit=5),
        queue.metrics,
    ]
    try:
        reads[n % len(reads)]()
    except Exception as exc:  # noqa: BLE001
        out.add("odd", f"read {n} after a failed write: {exc!r}")


def mix(path: Path, seconds: float) -> Outcome:
    """Senders, and threads that make a failing write and then a read, over and over."""
    out = Outcome()
    with durableq.open(path, durability="full") as broker:
        queue = broker.create_queue("jobs")
        until = time.monotonic() + seconds

        def fail_and_read() -> None:
            n = 0
            while time.monotonic() < until:
                n += 1
                _fail_one_write(broker, queue, n, out)
                _read(broker, queue, n, out)

        senders = [_sender(queue, i, until, out) for i in range(SENDERS)]
        _run_threads([*senders, fail_and_read, fail_and_read])
        out.batches = db_of(broker).group_stats.batches
    return out


def short_lived(path: Path, seconds: float) -> Outcome:
    """Senders, and threads that each make one failing write and end, a few at a time."""
    out = Outcome()
    with durableq.open(path, durability="full") as broker:
        queue = broker.create_queue("jobs")
        until = time.monotonic() + seconds

        def spawn() -> None:
            n = 0
            while time.monotonic() < until:
                threads = []
                for _ in range(3):
                    n += 1
                    threads.append(threading.Thread(target=_fail_one_write, args=(broker, queue, n, out)))
                    threads[-1].start()
                for thread in threads:
                    thread.join()

        _run_threads([*[_sender(queue, i, until, out) for i in range(SENDERS)], spawn])
        out.batches = db_of(broker).group_stats.batches
    return out


def buffered(path: Path, seconds: float) -> Outcome:
    """Threads sending through BufferedQueue (each its own, so their batches meet at the gate),
    and threads that make a failing write and then a read."""
    out = Outcome()
    with durableq.open(path, durability="full") as broker:
        queue = broker.create_queue("jobs")
        until = time.monotonic() + seconds

        def send_buffered(index: int) -> None:
            with durableq.BufferedQueue(queue, max_wait=0.01) as buffer:
                n = 0
                while time.monotonic() < until:
                    futures: list[Future[durableq.SendResult]] = []
                    for _ in range(25):
                        n += 1
                        futures.append(buffer.send(f"{index}.{n}"))
                    for future in futures:
                        try:
                            out.add("acknowledged", future.result(60).message_id)
                        except Exception as exc:  # noqa: BLE001
                            out.add("foreign", f"buffered send of thread {index}: {exc!r}")

        def fail_and_read() -> None:
            n = 0
            while time.monotonic() < until:
                n += 1
                _fail_one_write(broker, queue, n, out)
                _read(broker, queue, n, out)

        sends: list[Callable[[], None]] = [lambda i=i: send_buffered(i) for i in range(SENDERS)]  # type: ignore[misc]
        _run_threads([*sends, fail_and_read, fail_and_read])
        out.batches = db_of(broker).group_stats.batches
    return out


def member_thread_ends(path: Path, seconds: float) -> Outcome:
    """Deterministic: the first member of a batch fails and its thread ends while the batch is
    still open (a later member holds it open); then the batch commits."""
    out = Outcome()
    with durableq.open(path, durability="full") as broker:
        queue = broker.create_queue("jobs")
        db = db_of(broker)
        calls, blocking = Calls(), Blocking(db, "jobs", 3)

        def bad_delete() -> None:
            try:
                queue.delete("bad handle")
            finally:
                blocking.inside.wait()  # the thread ends once the batch is open past the send

        with gate_held(db):
            line_up(
                db,
                calls,
                {"bad handle": bad_delete, "send": lambda: queue.send("kept"), "blocking": blocking},
            )
        calls.threads["bad handle"].join()  # its thread ended, and with it the thread's own connection
        gc.collect()
        blocking.release()
        outcomes = calls.join()
        if not isinstance(outcomes["bad handle"], durableq.ReceiptHandleIsInvalid):
            out.add("odd", f"the bad delete gave {outcomes['bad handle']!r}")
        for name in ("send", "blocking"):
            if isinstance(outcomes[name], BaseException):
                out.add("foreign", f"{name}: {outcomes[name]!r}")
        if isinstance(outcomes["send"], durableq.SendResult):
            out.add("acknowledged", outcomes["send"].message_id)
        out.batches = db_of(broker).group_stats.batches
    return out


SCENARIOS: dict[str, Callable[[Path, float], Outcome]] = {
    "mix": mix,
    "short-lived": short_lived,
    "buffered": buffered,
    "member-thread-ends": member_thread_ends,
}


def main(argv: list[str]) -> Any:
    scenario, path, seconds = argv
    # Writers blocked forever: show where, and end with an error (the test's timeout is a backstop).
    faulthandler.dump_traceback_later(float(seconds) + WATCHDOG, exit=True)
    print(json.dumps(SCENARIOS[scenario](Path(path), float(seconds)).report()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
