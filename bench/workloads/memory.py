"""W7: peak memory of a consumer process over a backlog of 10k, 100k and 1M messages.

A consumer must not load the backlog: its memory should be flat in the depth
of the queue.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path

import psutil

from .. import procs
from ..backlog import DURABILITY, backlog, fill, label, sizes
from ..compare import Metric, alternate, collect
from ..model import Config, WorkloadResult
from ..systems import DurableQ

PEAK = Metric("peak RSS", "MiB", "lower")
GROWTH = Metric("RSS growth", "MiB", "lower")
MIB = 1024 * 1024


def _consumer(ready: Callable[[], None], path: Path, count: int) -> dict[str, float]:
    """Receive and delete ``count`` messages; report memory (durableq is imported already)."""
    process = psutil.Process()
    baseline = process.memory_info().rss
    system = DurableQ(path, DURABILITY)
    ready()
    for _ in range(count):
        messages = system.queue.receive()
        system.queue.delete(messages[0].receipt_handle)
    rss = process.memory_info().rss
    system.close()
    # ru_maxrss: the process's high-water mark, in KiB on Linux.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {PEAK.name: peak / MIB, GROWTH.name: (rss - baseline) / MIB}


def run(cfg: Config) -> WorkloadResult:
    count = cfg.pick(200, 20)
    paths = {label(size): backlog(cfg, size) for size in sizes(cfg)}

    def one(size: str) -> dict[str, float]:
        (memory,), _ = procs.run([(_consumer, (paths[size], count))], timeout=120)
        refill = DurableQ(paths[size], DURABILITY)
        fill(refill.queue, count)
        refill.close()
        return memory

    results = alternate(list(paths), cfg.rounds, one, "W7")
    measurements = []
    for size, rounds in results.items():
        measurements += collect(f"backlog {size}", ["durableq"], (PEAK, GROWTH), {"durableq": rounds}, {})
    return WorkloadResult(
        "W7",
        "consumer memory against a deep backlog",
        f"A fresh consumer process opens the file and receives and deletes {count} messages; peak RSS is "
        "its ru_maxrss (the whole life of the process, imports included), RSS growth is its RSS at the end "
        "minus its RSS before opening the broker.  Sizes alternate inside each round.",
        measurements,
        reference=None,
    )
