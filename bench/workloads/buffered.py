"""W11: one thread sending through a BufferedQueue, against explicit send_batch of 10."""

from __future__ import annotations

import time
from collections.abc import Callable

import durableq

from ..compare import Metric, alternate, collect
from ..model import Config, Measurement, WorkloadResult
from ..systems import DurableQ, create_durableq_file
from .cycle import BODY

THROUGHPUT = Metric("throughput", "msg/s")
SYSTEMS = ("send_batch", "BufferedQueue")


def _round(count: int) -> Callable[[tuple[str, DurableQ]], dict[str, float]]:
    entries = [durableq.SendEntry(str(i), BODY) for i in range(10)]

    def run(system: tuple[str, DurableQ]) -> dict[str, float]:
        name, adapter = system
        began = time.perf_counter()
        if name == "send_batch":
            for _ in range(count // 10):
                adapter.queue.send_batch(entries)
        else:
            with durableq.BufferedQueue(adapter.queue, max_batch=10) as buffered:
                futures = [buffered.send(BODY) for _ in range(count)]
            for future in futures:
                future.result()
        return {THROUGHPUT.name: count / (time.perf_counter() - began)}

    return run


def _case(cfg: Config, durability: str, count: int) -> list[Measurement]:
    case = f"durability={durability}"
    adapters = {}
    for name in SYSTEMS:
        path = cfg.path("W11", case, name)
        create_durableq_file(path, durability)
        adapters[name] = DurableQ(path, durability)
    run = _round(count)
    try:
        for name in SYSTEMS:
            _round(20)((name, adapters[name]))  # warm-up
        results = alternate(SYSTEMS, cfg.rounds, lambda name: run((name, adapters[name])), f"W11 {case}")
    finally:
        for adapter in adapters.values():
            adapter.close()
    return collect(case, SYSTEMS, [THROUGHPUT], results, {})


def run(cfg: Config) -> WorkloadResult:
    counts = {"full": cfg.pick(2_000, 50), "normal": cfg.pick(10_000, 100)}
    measurements: list[Measurement] = []
    for durability, count in counts.items():
        measurements += _case(cfg, durability, count)
    return WorkloadResult(
        "W11",
        "one thread sending through a BufferedQueue",
        "One process, one thread; per round "
        + " or ".join(f"{n} messages (durability={d})" for d, n in counts.items())
        + ": send_batch of 10 prepared entries, against BufferedQueue.send of each message (max_batch 10) "
        "and waiting for every future.",
        measurements,
        reference="send_batch",
    )
