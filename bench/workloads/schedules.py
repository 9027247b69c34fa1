"""W18: what a scheduler costs: the CPU of an idle ``durableq scheduler`` process, and the delay
between a tick and its send.

* **idle CPU**: a ``durableq scheduler`` process on a SQLite file holding 100 schedules whose next
  tick is months away; its CPU time (user + system, from psutil) over an idle stretch, in milliseconds
  of CPU per second (10 ms/s is 1 % of one core).  What an idle scheduler does is one indexed query
  per poll interval (1 s).
* **tick to send**: a ``rate(1 second)`` schedule fired by one scheduler process for a while; for each
  message, its ``sent_at`` (the broker's clock at the send) minus its ``DurableQ.ScheduledTime`` (the
  tick, a whole second), pooled over the rounds: p50 and p99.  The scheduler sleeps until the tick it
  knows is next, so the delay is the wake-up, the round's read and the claim-and-send transaction.

One process at a time, durability ``full``, on the scratch folder's filesystem.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import durableq

from ..model import Config, Measurement, WorkloadResult, percentile

KEY = "W18"
SYSTEM = "durableq scheduler"
IDLE_SCHEDULES = 100
_COMMAND = "from durableq.cli import main; main()"


def _scheduler(path: Path) -> subprocess.Popen[bytes]:
    """A scheduler process, returned once it has started (imported, opened the file): its start is
    not what is measured."""
    process = subprocess.Popen(
        [sys.executable, "-c", _COMMAND, "--db", str(path), "scheduler", "--log-level", "INFO"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # "... scheduler started on PATH"
    if b"scheduler started" not in first:
        raise RuntimeError(f"the scheduler did not start: {first!r}")
    threading.Thread(target=process.stderr.read, daemon=True).start()  # (a full pipe would block it)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    if process.wait(timeout=60) != 0:
        raise RuntimeError(f"the scheduler exited {process.returncode}")


def _idle_cpu(path: Path, seconds: float) -> float:
    """Milliseconds of CPU per second of an idle scheduler (1 ms/s is 0.1 % of a core)."""
    import psutil

    with durableq.open(path) as broker:
        broker.create_queue("idle")
        for n in range(IDLE_SCHEDULES):
            broker.create_schedule(f"yearly-{n}", "idle", f"cron({n % 60} 2 1 1 ? *)", "x")
    process = _scheduler(path)
    try:
        watched = psutil.Process(process.pid)
        before, start = watched.cpu_times(), time.perf_counter()
        time.sleep(seconds)
        after, wall = watched.cpu_times(), time.perf_counter() - start
    finally:
        _stop(process)
    busy = (after.user - before.user) + (after.system - before.system)
    return busy / wall * 1000


def _delays(path: Path, seconds: float) -> list[float]:
    with durableq.open(path) as broker:
        broker.create_queue("ticks")
        broker.create_schedule("every-second", "ticks", "rate(1 second)", "tick")
    process = _scheduler(path)
    try:
        time.sleep(seconds)
    finally:
        _stop(process)
    delays: list[float] = []
    with durableq.open(path) as broker:
        queue = broker.get_queue("ticks")
        while batch := queue.receive(10):
            for message in batch:
                tick = datetime.fromisoformat(str(message.attributes["DurableQ.ScheduledTime"].value))
                delays.append((message.sent_at - tick).total_seconds() * 1000)
                queue.delete(message.receipt_handle)
    return delays[1:]  # the first tick is the creation's (sent as soon as the process started)


def run(cfg: Config) -> WorkloadResult:
    idle_seconds, firing_seconds = cfg.pick((10.0, 30.0), (2.0, 4.0))
    idle = Measurement("idle", SYSTEM, "idle CPU", "ms per s", better="lower")
    pooled: list[float] = []
    for number in range(cfg.rounds):
        idle.samples.append(_idle_cpu(cfg.path(KEY, "idle", str(number)), idle_seconds))
        pooled += _delays(cfg.path(KEY, "ticks", str(number)), firing_seconds)
    p50 = Measurement("rate(1 second)", SYSTEM, "tick to send p50", "ms", better="lower")
    p99 = Measurement("rate(1 second)", SYSTEM, "tick to send p99", "ms", better="lower")
    p50.samples, p99.samples = [percentile(pooled, 50)], [percentile(pooled, 99)]
    return WorkloadResult(
        KEY,
        "schedules: a scheduler's idle cost and the delay from a tick to its send",
        f"A `durableq scheduler` process on a SQLite file (durability full): idle with {IDLE_SCHEDULES} "
        f"schedules months from their next tick for {idle_seconds:g} s (its CPU time per second), "
        f"and firing a rate(1 second) schedule for {firing_seconds:g} s (each message's sent_at minus its "
        f"scheduled time, {len(pooled)} ticks pooled over {cfg.rounds} rounds).",
        [idle, p50, p99],
        reference=None,
    )
