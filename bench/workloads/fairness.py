"""W20: fair queues.  A noisy tenant sends 100 times as many messages as each quiet one, more than the
consumers can take; how long do the quiet tenants' messages wait (send to receive) when the messages
carry their tenant as a group id (fair receives), when they carry none (oldest first), and with no
noisy tenant at all (the baseline)?

The run is a simulation on a broker clock that moves by steps, so the dwell times are those of the
receive order alone, the same on any machine: each step of 100 ms, the tenants send in its first half
and the consumers act in its second.  Eight consumers each take a batch of up to ten, work on it for
three steps (it stays in flight) and delete it; they start a step apart in turn.  The consumers take
about 27 messages a step; the quiet tenants send 9, the noisy one 100 (1 in the baseline).  The
wall-clock time of each receive is measured too: what the fair order costs a receive.  In the first
step the noisy tenant is not noisy yet (fewer than 30 of its messages in flight): the quiet messages
sent then wait a turn behind it, 9 of the 1,080 quiet samples (under the p99), --quick included.
"""

from __future__ import annotations

import time

import durableq

from ..compare import Metric, collect, in_rounds
from ..model import Config, WorkloadResult, percentile

DURABILITY = "normal"
STEP = 0.1  # seconds of the broker clock
QUIET = 9  # quiet tenants, one message each a step
NOISY = 100  # the noisy tenant's messages a step: 100 times a quiet tenant's
CONSUMERS = 8
BATCH = 10
WORK = 3  # steps a consumer works on a batch
FAIR, UNGROUPED, BASELINE = "fair (group ids)", "no group ids", "no noise (baseline)"
CASES = (FAIR, UNGROUPED, BASELINE)
QUIET_P50 = Metric("quiet dwell p50", "ms", "lower")
QUIET_P99 = Metric("quiet dwell p99", "ms", "lower")
NOISY_P50 = Metric("noisy dwell p50", "ms", "lower")
RECEIVE_P50 = Metric("receive p50", "µs", "lower")
METRICS = (QUIET_P50, QUIET_P99, NOISY_P50, RECEIVE_P50)


class _Clock:
    """The broker's clock: it moves only when the simulation says so."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _send(queue: durableq.Queue, tenant: str, count: int, grouped: bool) -> list[str]:
    """Send ``count`` messages of ``tenant``; their ids."""
    ids = []
    for start in range(0, count, BATCH):
        entries = [
            durableq.SendEntry(str(i), tenant, group_id=tenant if grouped else None)
            for i in range(start, min(start + BATCH, count))
        ]
        result = queue.send_batch(entries)
        assert not result.failed
        ids += [sent.message_id for sent in result.successful]
    return ids


def _simulate(cfg: Config, case: str, steps: int) -> dict[str, float]:
    """One run of ``case``: the dwell times (broker clock, ms) and the receives' wall-clock time."""
    clock = _Clock()
    dwell: dict[str, list[float]] = {"quiet": [], "noisy": []}
    receives: list[float] = []
    with durableq.open(
        cfg.path("W20", case, str(time.monotonic_ns())), clock=clock, durability=DURABILITY
    ) as broker:
        queue = broker.create_queue("tenants", visibility_timeout=3_600)
        held: list[tuple[int, list[durableq.Message]]] = [(i % WORK, []) for i in range(CONSUMERS)]
        waiting: dict[str, float] = {}  # quiet messages not received yet: their send time (ms)
        for step in range(steps):
            clock.now += STEP / 2
            _send(queue, "noisy", 1 if case == BASELINE else NOISY, case != UNGROUPED)
            for tenant in range(QUIET):
                for message_id in _send(queue, f"quiet{tenant}", 1, case != UNGROUPED):
                    waiting[message_id] = clock.now * 1000
            clock.now += STEP / 2
            for index, (due, batch) in enumerate(held):
                if step < due:
                    continue
                if batch:
                    assert not queue.delete_batch([m.receipt_handle for m in batch]).failed
                start = time.perf_counter()
                batch = queue.receive(BATCH)
                receives.append(time.perf_counter() - start)
                received_at = clock.now * 1000
                for message in batch:
                    tenant = "noisy" if message.body == "noisy" else "quiet"
                    dwell[tenant].append(received_at - message.sent_timestamp)
                    waiting.pop(message.message_id, None)
                held[index] = (step + (WORK if batch else 1), batch)
        # Quiet messages never received count with the wait they have had so far (a lower bound).
        dwell["quiet"] += [clock.now * 1000 - sent for sent in waiting.values()]
    return {
        QUIET_P50.name: percentile(dwell["quiet"], 50),
        QUIET_P99.name: percentile(dwell["quiet"], 99),
        NOISY_P50.name: percentile(dwell["noisy"], 50) if dwell["noisy"] else 0.0,
        RECEIVE_P50.name: percentile(receives, 50) * 1e6,
    }


def run(cfg: Config) -> WorkloadResult:
    steps = 120  # also with --quick: the first steps (see the module) stay under 1 % of the samples
    results = in_rounds(cfg.rounds, "W20", lambda: {case: _simulate(cfg, case, steps) for case in CASES})
    return WorkloadResult(
        "W20",
        "fair queues: a noisy tenant's neighbours",
        f"durability={DURABILITY}, {steps} steps of {STEP * 1000:.0f} ms on the broker's clock.  Per step "
        f"{QUIET} quiet tenants send 1 message each and a noisy tenant {NOISY} (1 in the baseline); "
        f"{CONSUMERS} consumers take batches of {BATCH} and hold each {WORK} steps before deleting it.  "
        "Dwell: send to receive on the broker's clock (a quiet message still waiting at the end counts "
        "with its wait so far); receive p50: wall-clock time of a receive.",
        collect("noisy tenant 100×", list(CASES), list(METRICS), results, {}),
        reference=BASELINE,
    )
