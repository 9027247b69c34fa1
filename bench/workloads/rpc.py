"""W13: request-response (``durableq.rpc``) between two processes: the round trip of one call, and
calls per second with 1, 4 and 16 concurrent requesters."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import durableq
from durableq.rpc import Requester

from ..compare import Metric, collect, in_rounds
from ..model import Config, Measurement, WorkloadResult, percentile

P50 = Metric("round trip p50", "ms", "lower")
P99 = Metric("round trip p99", "ms", "lower")
THROUGHPUT = Metric("calls", "calls/s")
QUEUE = "requests"
REQUESTERS = (1, 4, 16)
ROOT = Path(__file__).resolve().parents[2]


def echo(message: durableq.Message) -> str:
    """The responder's handler: the reply is the request."""
    return message.body


def _responder(path: Path) -> subprocess.Popen[bytes]:
    """``durableq worker --respond`` in a process of its own, 4 handler threads (the CLI opens the
    file at the default durability, "full")."""
    command = [str(Path(sys.executable).parent / "durableq"), "--db", str(path)]
    command += ["worker", QUEUE, "bench.workloads.rpc:echo", "--respond", "--concurrency", "4"]
    command += ["--log-level", "WARNING"]
    return subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _round_trips(requester: Requester, count: int) -> list[float]:
    latencies = []
    for i in range(count):
        start = time.perf_counter()
        requester.call(str(i), timeout=60)
        latencies.append(time.perf_counter() - start)
    return latencies


def _throughput(requesters: list[Requester], count: int) -> float:
    """Each requester makes ``count`` calls one after another, all requesters at once."""
    threads = [threading.Thread(target=_round_trips, args=(r, count)) for r in requesters]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(requesters) * count / (time.perf_counter() - start)


def run(cfg: Config) -> WorkloadResult:
    durability = "full"
    path = cfg.path("W13", durability)
    with durableq.open(path, durability=durability) as broker:
        broker.create_queue(QUEUE)
        responder = _responder(path)
        requesters = {n: [Requester(broker, QUEUE) for _ in range(n)] for n in REQUESTERS}
        try:
            _round_trips(requesters[1][0], 20)  # warm-up: the responder is up
            latency_count, calls = cfg.pick(500, 20), cfg.pick(100, 5)

            def one_round() -> dict[str, dict[str, float]]:
                values = {}
                latencies = _round_trips(requesters[1][0], latency_count)
                values["1 requester, one call at a time"] = {
                    P50.name: percentile(latencies, 50) * 1e3,
                    P99.name: percentile(latencies, 99) * 1e3,
                }
                for n, group in requesters.items():
                    values[f"{n} requesters"] = {THROUGHPUT.name: _throughput(group, calls)}
                return values

            results = in_rounds(cfg.rounds, "W13", one_round)
        finally:
            for group in requesters.values():
                for requester in group:
                    requester.close()
            responder.terminate()
            responder.wait()
    measurements: list[Measurement] = []
    measurements += collect("latency", ["1 requester, one call at a time"], [P50, P99], results, {})
    measurements += collect("throughput", [f"{n} requesters" for n in REQUESTERS], [THROUGHPUT], results, {})
    return WorkloadResult(
        "W13",
        "request-response between two processes",
        f"durability={durability}.  A responder process (`durableq worker --respond`, 4 handler threads, "
        "the handler returns the request's body) answers the queue; this process sends requests with "
        f"durableq.rpc.Requester (each with its own temporary reply queue).  Per round: {latency_count} "
        f"calls one after another (round trip timed per call), then {calls} calls by each of 1, 4 and "
        "16 requesters at once (threads of this process).",
        measurements,
    )
