"""W14: receive from a virtual queue when its host holds 10 virtual queues and when it holds 10,000
(two messages waiting in each): a virtual queue reads only its own index range, so the receive
should cost the same."""

from __future__ import annotations

import itertools
import time

import durableq

from ..compare import Metric, collect, in_rounds
from ..model import Config, WorkloadResult, percentile

DURABILITY = "normal"
PER_QUEUE = 2
P50 = Metric("receive p50", "µs", "lower")
P99 = Metric("receive p99", "µs", "lower")


def _host(cfg: Config, count: int) -> tuple[durableq.Broker, list[durableq.VirtualQueue]]:
    broker = durableq.open(cfg.path("W14", str(count)), durability=DURABILITY)
    host = broker.create_queue("host")
    queues = [host.virtual_queue(f"v{i}") for i in range(count)]
    for queue in queues:
        queue.send_batch([durableq.SendEntry(str(i), "x" * 100) for i in range(PER_QUEUE)])
    return broker, queues


def _receives(queues: list[durableq.VirtualQueue], count: int) -> list[float]:
    """``count`` timed receives, each from the next virtual queue in turn; each message is deleted
    and sent again (not timed), so every queue keeps its two."""
    latencies = []
    for queue in itertools.islice(itertools.cycle(queues), count):
        start = time.perf_counter()
        (message,) = queue.receive()
        latencies.append(time.perf_counter() - start)
        queue.delete(message.receipt_handle)
        queue.send(message.body)
    return latencies


def run(cfg: Config) -> WorkloadResult:
    sizes = (10, cfg.pick(10_000, 200))
    count = cfg.pick(1_000, 50)
    hosts = {size: _host(cfg, size) for size in sizes}
    labels = {size: f"{size:,} virtual queues" for size in sizes}
    try:
        for _, queues in hosts.values():
            _receives(queues, 20)  # warm-up

        def one_round() -> dict[str, dict[str, float]]:
            values = {}
            for size, (_, queues) in hosts.items():
                latencies = _receives(queues, count)
                values[labels[size]] = {
                    P50.name: percentile(latencies, 50) * 1e6,
                    P99.name: percentile(latencies, 99) * 1e6,
                }
            return values

        results = in_rounds(cfg.rounds, "W14", one_round)
    finally:
        for broker, _ in hosts.values():
            broker.close()
    return WorkloadResult(
        "W14",
        "virtual queues: receive with 10 and with 10,000 on one host",
        f"durability={DURABILITY}.  A host queue with {sizes[0]} and one with {sizes[1]:,} virtual queues, "
        f"{PER_QUEUE} messages waiting in each; per round {count} receives, each from the next virtual "
        "queue in turn (the message is then deleted and sent again, untimed).",
        collect("receive", [labels[s] for s in sizes], [P50, P99], results, {}),
        reference=labels[sizes[0]],
    )
