"""W8: a FIFO queue with 10,000 message groups and 1,000 messages in flight, next to a standard queue.

FIFO receive must skip groups that have a message in flight; done naively
that is a scan over every in-flight group on every receive.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import durableq
from durableq.limits import MAX_VISIBILITY_TIMEOUT

from ..compare import Metric, alternate, collect
from ..model import Config, WorkloadResult, percentile
from ..systems import DurableQ

DURABILITY = "normal"
PER_GROUP = 2
THROUGHPUT = Metric("cycle throughput", "msg/s")
P50 = Metric("receive p50", "µs", "lower")
P99 = Metric("receive p99", "µs", "lower")
SYSTEMS = ("standard", "fifo")


class _Contender:
    """A queue of one kind, filled with ``groups`` × :data:`PER_GROUP` messages.

    ``in_flight`` of them are held.
    """

    def __init__(self, cfg: Config, kind: str, groups: int, in_flight: int) -> None:
        self.groups = groups
        self.fifo = kind == "fifo"
        settings = {"fifo": True, "content_based_deduplication": True} if self.fifo else {}
        self.system = DurableQ(cfg.path("W8", kind), DURABILITY, "x.fifo" if self.fifo else "x", **settings)
        self.numbers: Iterator[int] = itertools.count()  # unique bodies: content-based deduplication
        queue = self.system.queue
        for _ in range(groups * PER_GROUP // 10):
            queue.send_batch([self.entry(str(i)) for i in range(10)])
        for _ in range(in_flight):
            # Held for 12 h: in flight for the whole run (a FIFO receive takes each from another group).
            if not queue.receive(visibility_timeout=MAX_VISIBILITY_TIMEOUT):
                raise RuntimeError("could not put the messages in flight")

    def entry(self, entry_id: str) -> durableq.SendEntry:
        n = next(self.numbers)
        group = f"group-{n % self.groups}" if self.fifo else None
        return durableq.SendEntry(entry_id, f"message {n}", group_id=group)

    def cycles(self, count: int) -> dict[str, float]:
        queue = self.system.queue
        latencies = []
        start = time.perf_counter()
        for _ in range(count):
            entry = self.entry("0")
            queue.send(entry.body, group_id=entry.group_id)
            before = time.perf_counter()
            messages = queue.receive()
            latencies.append(time.perf_counter() - before)
            queue.delete(messages[0].receipt_handle)
        elapsed = time.perf_counter() - start
        return {
            THROUGHPUT.name: count / elapsed,
            P50.name: percentile(latencies, 50) * 1e6,
            P99.name: percentile(latencies, 99) * 1e6,
        }


def run(cfg: Config) -> WorkloadResult:
    groups = cfg.pick(10_000, 200)
    in_flight = cfg.pick(1_000, 20)
    count = cfg.pick(1_000, 50)
    contenders = {kind: _Contender(cfg, kind, groups, in_flight) for kind in SYSTEMS}
    try:
        for contender in contenders.values():
            contender.cycles(20)  # warm-up
        results = alternate(SYSTEMS, cfg.rounds, lambda kind: contenders[kind].cycles(count), "W8")
    finally:
        for contender in contenders.values():
            contender.system.close()
    case = f"{groups:,} groups, {in_flight:,} in flight"
    return WorkloadResult(
        "W8",
        "FIFO with many groups and messages in flight",
        f"durability={DURABILITY}.  Each queue first gets {groups * PER_GROUP:,} messages (FIFO: {PER_GROUP} "
        f"in each of {groups:,} groups, content-based deduplication) and {in_flight:,} are received and held "
        f"(12 h visibility; on FIFO each blocks its group).  Each round times {count} cycles of send one "
        "(FIFO: to the next group in turn) → receive one → delete it; receive is also timed alone.",
        collect(case, SYSTEMS, (THROUGHPUT, P50, P99), results, {}),
        reference="standard",
    )
