"""W3: separate phases: send N messages, then receive and delete N."""

from __future__ import annotations

import time

from ..compare import Metric, Run, by_durability
from ..model import Config, WorkloadResult
from ..systems import Adapter
from .cycle import BODY

SEND = Metric("send", "msg/s")
DRAIN = Metric("receive+delete", "msg/s")


def _phases(count: int) -> Run:
    def run(adapter: Adapter) -> dict[str, float]:
        start = time.perf_counter()
        for _ in range(count):
            adapter.send(BODY)
        sent = time.perf_counter()
        for _ in range(count):
            adapter.delete(adapter.receive_one().token)
        drained = time.perf_counter()
        return {SEND.name: count / (sent - start), DRAIN.name: count / (drained - sent)}

    return run


def run(cfg: Config) -> WorkloadResult:
    counts = {"normal": cfg.pick(4000, 200), "full": cfg.pick(500, 50)}
    return WorkloadResult(
        "W3",
        "separate phases: send N, then receive and delete N",
        f"One process; each round sends N messages one at a time, then receives and deletes N "
        f"(N = {counts['normal']} at durability=normal, {counts['full']} at full); "
        "each phase is timed on its own.",
        by_durability(cfg, "W3", counts, [SEND, DRAIN], _phases),
    )
