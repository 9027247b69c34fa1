"""W10: threads of one process sending one message at a time (group commit).

Each thread sends single messages as fast as it can; the round's rate is all
the messages over the wall time.  ``durableq`` shares one broker between the
threads, so writes that wait behind a commit share the next one (group
commit); ``durableq, no grouping`` is the same broker with every write in a
transaction of its own, as before group commit; the ``floor`` gives each
thread its own plain ``sqlite3`` connection running durableq's INSERT.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..compare import Metric, alternate, collect
from ..model import Config, Measurement, WorkloadResult
from ..systems import DurableQ, Floor, create_durableq_file
from .cycle import BODY

THROUGHPUT = Metric("throughput", "msg/s")
THREADS = (1, 2, 4, 8)
SYSTEMS = ("floor", "durableq", "durableq, no grouping")


def _sends(count: int) -> Callable[[list[Callable[[str], Any]]], dict[str, float]]:
    """A round: every sender (one per thread) sends ``count`` messages."""

    def one_round(senders: list[Callable[[str], Any]]) -> dict[str, float]:
        start = threading.Barrier(len(senders) + 1)
        threads = [
            threading.Thread(target=lambda s=send: (start.wait(), [s(BODY) for _ in range(count)]))
            for send in senders
        ]
        for thread in threads:
            thread.start()
        start.wait()
        began = time.perf_counter()
        for thread in threads:
            thread.join()
        return {THROUGHPUT.name: count * len(senders) / (time.perf_counter() - began)}

    return one_round


def _name(durability: str, threads: int) -> str:
    return f"durability={durability}, {threads} thread{'s' if threads > 1 else ''}"


def _case(cfg: Config, durability: str, threads: int, count: int) -> list[Measurement]:
    case = _name(durability, threads)
    paths = {name: cfg.path("W10", case, name.replace(", ", "-").replace(" ", "_")) for name in SYSTEMS}
    for path in paths.values():
        create_durableq_file(path, durability)
    floors = [Floor(paths["floor"], durability) for _ in range(threads)]
    grouped = DurableQ(paths["durableq"], durability)
    alone = DurableQ(paths["durableq, no grouping"], durability)
    db = alone.broker._rt.db  # type: ignore[attr-defined]
    db._grouping = False  # every write in its own transaction: durableq before group commit
    senders = {
        "floor": [floor.send for floor in floors],
        "durableq": [grouped.send] * threads,
        "durableq, no grouping": [alone.send] * threads,
    }
    rounds = _sends(count)
    try:
        for name in SYSTEMS:
            _sends(5)(senders[name])  # warm-up: statement caches, first pages
        results = alternate(SYSTEMS, cfg.rounds, lambda name: rounds(senders[name]), f"W10 {case}")
    finally:
        for adapter in [*floors, grouped, alone]:
            adapter.close()
    return collect(case, SYSTEMS, [THROUGHPUT], results, {})


def _scaling(measurements: list[Measurement], durability: str, most: int) -> str:
    def rate(system: str, threads: int) -> float | None:
        found = [m.value for m in measurements if m.case == _name(durability, threads) and m.system == system]
        return found[0] if found else None

    parts = []
    for system in SYSTEMS:
        one, many = rate(system, 1), rate(system, most)
        if one and many:
            parts.append(f"{system} {many / one:.2f}×")
    return f"durability={durability}: {most} threads against 1 thread of the same system: " + ", ".join(parts)


def run(cfg: Config) -> WorkloadResult:
    counts = {"full": cfg.pick(150, 10), "normal": cfg.pick(600, 20)}
    threads = cfg.pick(THREADS, (1, 4))
    measurements: list[Measurement] = []
    for durability, count in counts.items():
        for number in threads:
            measurements += _case(cfg, durability, number, count)
    return WorkloadResult(
        "W10",
        "threads sending one message at a time (group commit)",
        f"One process; {', '.join(map(str, threads))} threads each send "
        + " or ".join(f"{n} messages (durability={d})" for d, n in counts.items())
        + " one at a time, per round; the systems take turns.  durableq: one broker shared by the threads; "
        "'no grouping': the same with every write committed alone; floor: a plain sqlite3 connection per "
        "thread running durableq's INSERT.",
        measurements,
        notes=[_scaling(measurements, durability, threads[-1]) for durability in counts],
    )
