"""W5: receive latency with a backlog of 10 thousand, 100 thousand and 1 million messages.

A queue index that degrades with depth shows here: the claim should cost
the same at the head of a million messages as of ten thousand.
"""

from __future__ import annotations

import time

from ..backlog import DURABILITY, backlog, fill, label, sizes
from ..compare import WARMUP, Metric, collect, in_rounds
from ..model import Config, Measurement, WorkloadResult, percentile
from ..systems import Adapter, DurableQ, Floor

P50 = Metric("receive p50", "µs", "lower")
P99 = Metric("receive p99", "µs", "lower")
SYSTEMS = ("floor", "durableq")

Key = tuple[str, str]  # (depth, system)


def _receive_latencies(adapter: Adapter, count: int, refill: DurableQ) -> list[float]:
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
    return latencies


def _one_round(
    adapters: dict[Key, Adapter], refills: dict[str, DurableQ], count: int, turn: int
) -> dict[Key, dict[str, float]]:
    """``count`` timed receives per contender, taken in turns of ``turn``: a burst of load on
    the shared machine then lands on every depth and system alike, not on one of them."""
    latencies: dict[Key, list[float]] = {key: [] for key in adapters}
    for _ in range(count // turn):
        for key, adapter in adapters.items():
            latencies[key] += _receive_latencies(adapter, turn, refills[key[0]])
    return {
        key: {P50.name: percentile(values, 50) * 1e6, P99.name: percentile(values, 99) * 1e6}
        for key, values in latencies.items()
    }


def run(cfg: Config) -> WorkloadResult:
    count, turn = cfg.pick((1000, 50), (100, 10))
    paths = {label(size): backlog(cfg, size) for size in sizes(cfg)}
    # Per depth, both systems work on the same file: the same backlog, the same pages on disk.
    refills = {depth: DurableQ(path, DURABILITY) for depth, path in paths.items()}
    adapters: dict[Key, Adapter] = {}
    for depth, path in paths.items():
        adapters[depth, "floor"] = Floor(path, DURABILITY)
        adapters[depth, "durableq"] = refills[depth]
    try:
        for (depth, _), adapter in adapters.items():
            _receive_latencies(adapter, WARMUP, refills[depth])
        # Every round visits every depth: run one depth after another and a change in the
        # machine's load between them would pass for an effect of the depth.
        results = in_rounds(cfg.rounds, "W5", lambda: _one_round(adapters, refills, count, turn))
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
        f"One process, durability={DURABILITY}; the backlogs are built with send_batch.  Each round times "
        f"{count} receives per backlog and system, one by one (deleting each, untimed), in turns of {turn} "
        "across all backlogs and systems, refilling after each turn; the value is the median over rounds "
        "of each round's percentile.",
        measurements,
    )
