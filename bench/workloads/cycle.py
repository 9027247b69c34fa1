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


#: Each round gives every system this many turns (of the counts below) in rotation.
TURNS = 8


def _per_round(counts: dict[str, int]) -> str:
    return " or ".join(f"{TURNS} × {n} cycles (durability={d})" for d, n in counts.items())


def single(cfg: Config) -> WorkloadResult:
    counts = {"normal": cfg.pick(500, 50), "full": cfg.pick(80, 10)}
    return WorkloadResult(
        "W1",
        "send → receive → delete, one message at a time",
        f"One process; each round times {_per_round(counts)} of: send one message, receive it, delete it; "
        "the systems take turns inside the round.",
        by_durability(cfg, "W1", counts, [THROUGHPUT], _single, turns=cfg.pick(TURNS, 2)),
    )


def batched(cfg: Config) -> WorkloadResult:
    counts = {"normal": cfg.pick(100, 10), "full": cfg.pick(20, 5)}
    return WorkloadResult(
        "W2",
        "send → receive → delete in batches of 10",
        f"One process; each round times {_per_round(counts)} of: send_batch of 10, "
        "receive(max_messages=10), delete_batch of 10; the systems take turns inside the round.  The floor "
        "runs executemany of the INSERT in one transaction, one claim with LIMIT 10, and the 10 DELETEs in "
        "one transaction.",
        by_durability(cfg, "W2", counts, [THROUGHPUT], _batched, batches=True, turns=cfg.pick(TURNS, 2)),
        notes=["persist-queue and litequeue have no batch API."],
    )
