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


def run(cfg: Config) -> WorkloadResult:
    count = cfg.pick(1000, 100)
    paths = {label(size): backlog(cfg, size) for size in sizes(cfg)}
    # Per depth, both systems work on the same file: the same backlog, the same pages on disk.
    refills = {depth: DurableQ(path, DURABILITY) for depth, path in paths.items()}
    adapters: dict[tuple[str, str], Adapter] = {}
    for depth, path in paths.items():
        adapters[depth, "floor"] = Floor(path, DURABILITY)
        adapters[depth, "durableq"] = refills[depth]
    try:
        for (depth, _), adapter in adapters.items():
            _receive_latencies(adapter, WARMUP, refills[depth])
        # Every round visits every depth: run one depth after another and a change in the
        # machine's load between them would pass for an effect of the depth.
        results = alternate(
            list(adapters),
            cfg.rounds,
            lambda key: _receive_latencies(adapters[key], count, refills[key[0]]),
            "W5",
        )
    finally:
        for adapter in adapters.values():
            adapter.close()
    measurements: list[Measurement] = []
    for depth in paths:
        by_system = {system: results[depth, system] for system in SYSTEMS}
        measurements += collect(f"backlog {depth}", SYSTEMS, (P50, P99), by_system, {})
    return WorkloadResult(
        "W5",
        "receive latency against a deep backlog",
        f"One process, durability={DURABILITY}; the backlogs are built with send_batch.  Each round visits "
        f"every backlog and system in turn and times {count} receives one by one (deleting each, untimed), "
        "then refills the backlog; the value is the median over rounds of each round's percentile.",
        measurements,
    )
