"""W1 and W2: the send → receive → delete cycle, one message at a time or in batches of 10."""

from __future__ import annotations

import time

from ..compare import Metric, Run, by_durability
from ..model import Config, WorkloadResult
from ..systems import Adapter

BODY = "x" * 100
THROUGHPUT = Metric("throughput", "msg/s")
BATCH = 10


def _single(count: int) -> Run:
    def run(adapter: Adapter) -> dict[str, float]:
        start = time.perf_counter()
        for _ in range(count):
            adapter.send(BODY)
            adapter.delete(adapter.receive_one().token)
        return {THROUGHPUT.name: count / (time.perf_counter() - start)}

    return run


def _batched(count: int) -> Run:
    bodies = [BODY] * BATCH

    def run(adapter: Adapter) -> dict[str, float]:
        start = time.perf_counter()
        for _ in range(count):
            adapter.send_batch(bodies)
            tokens: list[object] = []
            while len(tokens) < BATCH:  # a receive may return fewer than asked for
                tokens.extend(r.token for r in adapter.receive_batch(BATCH - len(tokens)))
            adapter.delete_batch(tokens)
        return {THROUGHPUT.name: count * BATCH / (time.perf_counter() - start)}

    return run


def single(cfg: Config) -> WorkloadResult:
    counts = {"normal": cfg.pick(4000, 200), "full": cfg.pick(600, 50)}
    return WorkloadResult(
        "W1",
        "send → receive → delete, one message at a time",
        f"One process; each round times {counts['normal']} cycles (durability=normal) or "
        f"{counts['full']} (full) of: send one message, receive it, delete it.",
        by_durability(cfg, "W1", counts, [THROUGHPUT], _single),
    )


def batched(cfg: Config) -> WorkloadResult:
    counts = {"normal": cfg.pick(800, 20), "full": cfg.pick(150, 10)}
    return WorkloadResult(
        "W2",
        "send → receive → delete in batches of 10",
        f"One process; each round times {counts['normal']} cycles (normal) or {counts['full']} (full) of: "
        "send_batch of 10, receive(max_messages=10), delete_batch of 10.  The floor runs executemany "
        "of the INSERT in one transaction, one claim with LIMIT 10, and the 10 DELETEs in one transaction.",
        by_durability(cfg, "W2", counts, [THROUGHPUT], _batched, batches=True),
        notes=["persist-queue and litequeue have no batch API."],
    )
