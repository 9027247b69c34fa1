"""W15, part 2: encryption at rest.  The W1 cycle (send → receive → delete, one at a time) and the W2
cycle (batches of 10) on a plain queue against a queue with ``kms_master_key_id``, messages of 200
bytes with two attributes.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import durableq

from ..compare import Metric, collect, in_rounds
from ..model import Config, Measurement

THROUGHPUT = Metric("throughput", "msg/s")
#: The master key's alias in the workload's keyring.
KEY_ALIAS = "bench"

ENCRYPTION_SYSTEMS = ("plain", "encrypted")
QUEUE = "jobs"
BODY = ("order 4711 for customer c-0815: " * 7)[:200]
ATTRIBUTES = {"customer": "c-0815", "priority": 3}
BATCH = 10
TURNS = 8


class _Cycles:
    """A queue of its own file, plain or encrypted under the keyring's master key."""

    def __init__(self, path: Path, durability: str, keyring: Path, encrypted: bool) -> None:
        self.broker = durableq.open(path, durability=durability, keyring=keyring)
        settings = {"kms_master_key_id": f"alias/{KEY_ALIAS}"} if encrypted else {}
        self.queue = self.broker.create_queue(QUEUE, **settings)
        self.entries = [durableq.SendEntry(str(i), BODY, attributes=ATTRIBUTES) for i in range(BATCH)]

    def single(self, count: int) -> float:
        queue = self.queue
        start = time.perf_counter()
        for _ in range(count):
            queue.send(BODY, attributes=ATTRIBUTES)
            (message,) = queue.receive()
            queue.delete(message.receipt_handle)
        return count / (time.perf_counter() - start)

    def batched(self, count: int) -> float:
        queue = self.queue
        start = time.perf_counter()
        for _ in range(count):
            if queue.send_batch(self.entries).failed:
                raise RuntimeError("send_batch failed")
            handles: list[str] = []
            while len(handles) < BATCH:  # a receive may return fewer than asked for
                handles += [m.receipt_handle for m in queue.receive(max_messages=BATCH - len(handles))]
            if queue.delete_batch(handles).failed:
                raise RuntimeError("delete_batch failed")
        return count * BATCH / (time.perf_counter() - start)

    def close(self) -> None:
        self.broker.close()


def encryption_case(cfg: Config, keyring: Path, shape: str, durability: str, count: int) -> list[Measurement]:
    case = f"{shape}, durability={durability}"
    cycles = {
        name: _Cycles(
            cfg.path("W15", shape.replace(" ", "_"), durability, name), durability, keyring, name != "plain"
        )
        for name in ENCRYPTION_SYSTEMS
    }
    turns = cfg.pick(TURNS, 2)

    def run(name: str, n: int) -> float:
        c = cycles[name]
        return c.single(n) if shape == "single" else c.batched(n)

    def one_round() -> dict[str, dict[str, float]]:
        # The systems take turns inside the round; its rate is its turns' messages over their time.
        rates: dict[str, list[float]] = {name: [] for name in ENCRYPTION_SYSTEMS}
        for _ in range(turns):
            for name in ENCRYPTION_SYSTEMS:
                rates[name].append(run(name, count))
        return {name: {THROUGHPUT.name: statistics.harmonic_mean(r)} for name, r in rates.items()}

    try:
        for name in ENCRYPTION_SYSTEMS:
            run(name, 20 if shape == "single" else 2)  # warm-up: statements, the data key
        results = in_rounds(cfg.rounds, f"W15 {case}", one_round)
    finally:
        for c in cycles.values():
            c.close()
    return collect(case, ENCRYPTION_SYSTEMS, [THROUGHPUT], results, {})
