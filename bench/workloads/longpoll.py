"""W6: long polling across processes: wake-up latency, and the CPU an idle long-poller burns."""

from __future__ import annotations

import math
import random
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import procs
from ..model import Config, Measurement, WorkloadResult, percentile
from ..systems import DurableQ, create_durableq_file

DURABILITY = "normal"
CASE = "wait_time=20, another process sends"
#: The producer waits this long (uniformly) after the consumer's cue, so the consumer is inside
#: its wait rather than still on its way into it.
PAUSE = (0.02, 0.06)
#: The idle measurement starts this long after the long poll did (its first look, the watcher starting).
STARTUP = 1.0


def _consumer(ready: Callable[[], None], path: Path, count: int, cue: Any) -> list[float]:
    system = DurableQ(path, DURABILITY)
    ready()
    woke = []
    for _ in range(count):
        cue.put(None)  # about to block in receive
        messages = system.queue.receive(wait_time=20)
        woke.append(time.time())
        if not messages:
            raise RuntimeError("a long poll ended empty although a message was sent")
        system.queue.delete(messages[0].receipt_handle)
    system.close()
    return woke


def _producer(ready: Callable[[], None], path: Path, count: int, cue: Any, seed: int) -> list[float]:
    system = DurableQ(path, DURABILITY)
    rng = random.Random(seed)
    ready()
    sent = []
    for i in range(count):
        cue.get(timeout=60)
        time.sleep(rng.uniform(*PAUSE))
        system.queue.send(f"wake up {i}")
        sent.append(time.time())  # when send returned: the message is committed
    system.close()
    return sent


def _idle(ready: Callable[[], None], path: Path, seconds: float) -> tuple[float, float]:
    """(CPU seconds of the whole process, all threads, wall seconds) while a long poll waits on an
    empty queue, after its first second (its first look and the watcher's start are not idling)."""
    system = DurableQ(path, DURABILITY)
    ready()
    wait = min(20, math.ceil(seconds + STARTUP) + 1)  # whole seconds: SQS refuses others
    poll = threading.Thread(target=system.queue.receive, kwargs={"wait_time": wait})
    poll.start()
    time.sleep(STARTUP)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    time.sleep(seconds)  # this thread sleeps: the CPU counted is the waiting poll's (and housekeeping's)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    poll.join()
    system.close()
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def run(cfg: Config) -> WorkloadResult:
    per_round = cfg.pick(60, 10)
    # About 10 s of idle polling in all, in slices of at least 2 s (1 s with --quick).
    idle_seconds = cfg.pick(max(2.0, 10.0 / cfg.rounds), 1.0)
    latencies: list[list[float]] = []
    idle: list[tuple[float, float]] = []
    for r in range(cfg.rounds):
        path = cfg.path("W6", str(r))
        create_durableq_file(path, DURABILITY)
        cue = procs.CONTEXT.Queue()
        (woke, sent), _ = procs.run(
            [(_consumer, (path, per_round, cue)), (_producer, (path, per_round, cue, r))], timeout=120
        )
        latencies.append([(w - s) * 1000 for w, s in zip(woke, sent)])
        (usage,), _ = procs.run([(_idle, (path, idle_seconds))], timeout=idle_seconds + 60)
        idle.append(usage)
    pooled = [ms for round_ in latencies for ms in round_]
    share = [cpu / wall * 100 for cpu, wall in idle]

    def measurement(metric: str, unit: str, samples: list[float], headline: float) -> Measurement:
        return Measurement(
            CASE, "durableq", metric, unit, samples, "lower", headline, note="pooled over rounds"
        )

    return WorkloadResult(
        "W6",
        "long-poll wake-up latency and idle CPU",
        f"A consumer process blocks in receive(wait_time=20); a producer process sends {per_round} messages "
        f"per round, each {PAUSE[0] * 1000:g}–{PAUSE[1] * 1000:g} ms after the consumer's cue; latency = "
        "time.time() when receive returned minus time.time() when send returned.  Idle CPU: a consumer "
        f"long-polls an empty queue; over {idle_seconds:g} s per round, after the poll's first "
        f"{STARTUP:g} s, process CPU time (all threads) over wall time.",
        [
            measurement("wake-up p50", "ms", [percentile(x, 50) for x in latencies], percentile(pooled, 50)),
            measurement("wake-up p99", "ms", [percentile(x, 99) for x in latencies], percentile(pooled, 99)),
            measurement("wake-up max", "ms", [max(x) for x in latencies], max(pooled)),
            measurement(
                "idle long-poll CPU",
                "% of one core",
                share,
                sum(c for c, _ in idle) / sum(w for _, w in idle) * 100,
            ),
        ],
        reference=None,
        distribution=("wake-up latency (ms)", pooled),
        notes=[
            f"{len(pooled)} wake-ups in all; percentiles are over all of them, the spread shows the rounds'.",
            (
                "Only durableq: neither peer can wake a consumer in another process "
                "(persist-queue's blocking get re-polls every 10 s; litequeue has no blocking receive)."
            ),
        ],
    )
