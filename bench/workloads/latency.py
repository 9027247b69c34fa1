"""W5: receive latency with a backlog of 10 thousand, 100 thousand and 1 million messages.

A queue index that degrades with depth shows here: the claim should cost
the same at the head of a million messages as of ten thousand.
"""

from __future__ import annotations

import time

from ..backlog import DURABILITY, backlog, fill, label, sizes
from ..compare import WARMUP, Metric, alternate, collect
from ..model import Config, Measurement, WorkloadResult, percentile
from ..systems import Adapter, DurableQ, Floor

P50 = Metric("receive p50", "µs", "lower")
P99 = Metric("receive p99", "µs", "lower")
SYSTEMS = ("floor", "durableq")


def _receive_latencies(adapter: Adapter, count: int, refill: DurableQ) -> dict[str, float]:
    """Time ``count`` receives one by one (the delete after each is not timed), then put
    ``count`` messages back so the backlog keeps its size."""
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        received = adapter.receive()
        latencies.append(time.perf_counter() - start)
        if received is None:
            raise RuntimeError("the backlog ran dry")
        adapter.delete(received.token)
    fill(refill.queue, count)
    return {P50.name: percentile(latencies, 50) * 1e6, P99.name: percentile(latencies, 99) * 1e6}


def _at_depth(cfg: Config, size: int, count: int) -> list[Measurement]:
    path = backlog(cfg, size)
    # Both systems work on the same file, in turns: the same backlog, the same pages on disk.
    dq = DurableQ(path, DURABILITY)
    adapters: dict[str, Adapter] = {"floor": Floor(path, DURABILITY), "durableq": dq}
    try:
        for adapter in adapters.values():
            _receive_latencies(adapter, WARMUP, dq)
        results = alternate(
            SYSTEMS,
            cfg.rounds,
            lambda name: _receive_latencies(adapters[name], count, dq),
            f"W5 backlog {label(size)}",
        )
    finally:
        for adapter in adapters.values():
            adapter.close()
    return collect(f"backlog {label(size)}", SYSTEMS, (P50, P99), results, {})


def run(cfg: Config) -> WorkloadResult:
    count = cfg.pick(1000, 100)
    measurements = [m for size in sizes(cfg) for m in _at_depth(cfg, size, count)]
    return WorkloadResult(
        "W5",
        "receive latency against a deep backlog",
        f"One process, durability={DURABILITY}; the backlog is built with send_batch.  Each round times "
        f"{count} receives one by one (deleting each, untimed) and then refills the backlog; the value is "
        "the median over rounds of each round's percentile.",
        measurements,
    )
