"""W4: two producer and two consumer processes on one file.

Measures aggregate throughput, and checks the promise that matters most under
concurrency: no message is received by two consumers within its visibility
timeout.  Each consumer records (message id, receive time); the parent pairs
them up afterwards.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from durableq.limits import DEFAULT_VISIBILITY_TIMEOUT

from .. import procs
from ..compare import Metric, alternate, collect, unavailable
from ..model import Config, WorkloadResult
from ..systems import ALL_SYSTEMS, SystemSpec
from .cycle import BODY

PRODUCERS = 2
CONSUMERS = 2
DURABILITY = "normal"
#: Every system is judged against durableq's default visibility timeout (the peers have none:
#: for them any second receipt of a message by another consumer is a duplicate).
WINDOW = float(DEFAULT_VISIBILITY_TIMEOUT)

THROUGHPUT = Metric("throughput", "msg/s")
DUPLICATES = Metric("duplicates in window", "messages", "lower", summed=True)
REDELIVERED = Metric("received more than once", "messages", "lower", summed=True)
LOST = Metric("lost", "messages", "lower", summed=True)
METRICS = (THROUGHPUT, DUPLICATES, REDELIVERED, LOST)

Record = tuple[str, float]  # (message id, time.time() of the receive)


def _producer(ready: Callable[[], None], spec: SystemSpec, index: int, count: int, done: Any) -> None:
    system = spec.open()
    ready()
    for i in range(count):
        system.send(f"producer {index} message {i} {BODY}")
    with done.get_lock():
        done.value += 1
    system.close()


def _consumer(ready: Callable[[], None], spec: SystemSpec, done: Any) -> tuple[list[Record], float]:
    system = spec.open()
    ready()
    records: list[Record] = []
    finished_at = time.monotonic()
    while True:
        # Read "producers done" before receiving: every send committed before it was set,
        # so an empty receive after it means nothing visible is left.
        producers_done = done.value == PRODUCERS
        received = system.receive()
        if received is None:
            if producers_done:
                break
            time.sleep(0.001)  # the same short back-off for every system
            continue
        records.append((received.key, time.time()))
        system.delete(received.token)
        finished_at = time.monotonic()
    system.close()
    return records, finished_at


def check(per_consumer: Sequence[list[Record]], window: float) -> tuple[int, int, int]:
    """(messages received by two different consumers less than ``window`` apart,
    messages received more than once at all, total distinct messages received)."""
    receipts: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for consumer, records in enumerate(per_consumer):
        for key, at in records:
            receipts[key].append((consumer, at))
    in_window = sum(
        1
        for seen in receipts.values()
        if any(c1 != c2 and abs(t1 - t2) < window for (c1, t1), (c2, t2) in itertools.combinations(seen, 2))
    )
    redelivered = sum(1 for seen in receipts.values() if len(seen) > 1)
    return in_window, redelivered, len(receipts)


def _one_round(spec: SystemSpec, total: int) -> dict[str, float]:
    spec.prepare()
    done = procs.CONTEXT.Value("i", 0)
    per_producer = total // PRODUCERS
    tasks: list[procs.Task] = [(_producer, (spec, i, per_producer, done)) for i in range(PRODUCERS)]
    tasks += [(_consumer, (spec, done))] * CONSUMERS
    outcomes, started = procs.run(tasks, timeout=300)
    consumers = outcomes[PRODUCERS:]
    in_window, redelivered, distinct = check([records for records, _ in consumers], WINDOW)
    elapsed = max(finished for _, finished in consumers) - started
    return {
        THROUGHPUT.name: distinct / elapsed,
        DUPLICATES.name: in_window,
        REDELIVERED.name: redelivered,
        LOST.name: per_producer * PRODUCERS - distinct,
    }


def run(cfg: Config) -> WorkloadResult:
    total = cfg.pick(4000, 200)
    case = f"{PRODUCERS}+{CONSUMERS} processes"
    skipped = unavailable(ALL_SYSTEMS)
    runnable = [name for name in ALL_SYSTEMS if name not in skipped]
    serial = itertools.count()
    results = alternate(
        runnable,
        cfg.rounds,
        lambda name: _one_round(SystemSpec(name, cfg.path("W4", name, str(next(serial))), DURABILITY), total),
        "W4",
    )
    return WorkloadResult(
        "W4",
        "2 producer and 2 consumer processes on one file",
        f"Each round: {PRODUCERS} producer processes send {total} messages in all while {CONSUMERS} consumer "
        f"processes receive and delete until the producers are done and the queue is empty "
        f"(durability={DURABILITY}, fresh file per round).  Throughput = distinct messages / time from "
        "all processes ready to the last delete.  Consumers record (message id, receive time); a duplicate "
        f"in window is a message received by two consumers less than {WINDOW:g} s (the visibility timeout) "
        "apart.",
        collect(case, ALL_SYSTEMS, METRICS, results, skipped),
        notes=[
            "Every consumer polls without waiting and sleeps 1 ms when a receive comes back empty, "
            "whatever the system.",
            (
                "persist-queue's get is a SELECT then an UPDATE guarded by a thread lock only, so across "
                "processes two consumers can get the same message: its duplicate counts are its behaviour, "
                "not a harness error."
            ),
        ],
    )
