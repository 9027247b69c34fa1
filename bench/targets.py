"""The targets of issue 8, judged against the measured values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .model import WorkloadResult, ratio
from .systems import PEERS

#: W5: receive p50 at the deepest backlog at most this many times the shallowest's.
DEEP_BACKLOG = 1.3
#: W7 "flat memory": peak RSS at the deepest backlog at most this many times the shallowest's.
FLAT_MEMORY = 1.10


@dataclass(frozen=True)
class Target:
    name: str
    goal: str
    measured: str
    met: bool | None  # None: not run

    @property
    def status(self) -> str:
        return {True: "met", False: "**missed**", None: "not run"}[self.met]


class _Results:
    """Medians by (workload, case, system, metric); None where a value is missing."""

    def __init__(self, results: list[WorkloadResult]) -> None:
        self._by_key = {r.key: r for r in results}

    def value(self, key: str, case: str, system: str, metric: str) -> float | None:
        result = self._by_key.get(key)
        found = result.find(case, system, metric) if result else None
        return found.value if found else None

    def ratio(self, key: str, case: str, system: str, reference: str, metric: str) -> float | None:
        result = self._by_key.get(key)
        m = result.find(case, system, metric) if result else None
        ref = result.find(case, reference, metric) if result else None
        return ratio(m, ref) if m and ref else None

    def ratio_across(self, key: str, shallow: str, deep: str, system: str, metric: str) -> float | None:
        """How many times ``deep``'s value is ``shallow``'s (of a lower-is-better metric)."""
        result = self._by_key.get(key)
        a = result.find(shallow, system, metric) if result else None
        b = result.find(deep, system, metric) if result else None
        # ratio() gives speed: shallow's speed relative to deep = deep's value / shallow's.
        return ratio(a, b) if a and b else None

    def cases(self, key: str) -> list[str]:
        result = self._by_key.get(key)
        return result.cases() if result else []


def _vs_floor(results: _Results, key: str, case: str, goal: float) -> Target:
    r = results.ratio(key, case, "durableq", "floor", "throughput")
    name = f"{key} {case}: durableq ≥ {goal:g}× floor"
    wanted = f"≥ {goal:g}× floor throughput"
    return Target(name, wanted, "—" if r is None else f"{r:.3f}× floor", None if r is None else r >= goal)


def _ahead_of_peers(results: _Results) -> Target:
    case = "durability=normal"
    ratios = {p: results.ratio("W1", case, "durableq", p, "throughput") for p in PEERS}
    ran = {p: r for p, r in ratios.items() if r is not None}
    name, goal = f"W1 {case}: durableq ahead of both peers", "faster than each peer"
    if not ran:
        return Target(name, goal, "—", None)
    measured = ", ".join(f"{r:.2f}× {p}" for p, r in ran.items())
    if len(ran) < len(ratios):
        measured += f" ({', '.join(p for p in ratios if p not in ran)}: not installed)"
    return Target(name, goal, measured, all(r > 1 for r in ran.values()))


def _growth(results: _Results, key: str, metric: str, unit: str, limit: float, name: str) -> Target:
    """The durableq value at the deepest backlog (last case) over the shallowest (first case),
    for a metric where lower is better (latency, memory)."""
    goal = f"{metric} at the deepest backlog ≤ {limit:g}× the shallowest's"
    cases = results.cases(key)
    if len(cases) < 2:
        return Target(name, goal, "—", None)
    shallow = results.value(key, cases[0], "durableq", metric)
    deep = results.value(key, cases[-1], "durableq", metric)
    # The depths ran side by side in every round: the median of the per-round ratios.
    growth = results.ratio_across(key, cases[0], cases[-1], "durableq", metric)
    if shallow is None or deep is None or growth is None:
        return Target(name, goal, "—", None)
    measured = f"{deep:.1f} {unit} ({cases[-1]}) vs {shallow:.1f} {unit} ({cases[0]}): {growth:.3f}×"
    return Target(name, goal, measured, growth <= limit)


def _below(results: _Results, key: str, metric: str, limit: float, unit: str, name: str) -> Target:
    cases = results.cases(key)
    value = results.value(key, cases[0], "durableq", metric) if cases else None
    goal = f"< {limit:g} {unit}"
    return Target(
        name, goal, "—" if value is None else f"{value:.2f} {unit}", None if value is None else value < limit
    )


def evaluate(workload_results: list[WorkloadResult]) -> list[Target]:
    results = _Results(workload_results)
    checks: list[Callable[[], Target]] = [
        lambda: _vs_floor(results, "W1", "durability=normal", 0.7),
        lambda: _ahead_of_peers(results),
        lambda: _vs_floor(results, "W1", "durability=full", 0.8),
        lambda: _vs_floor(results, "W2", "durability=normal", 0.7),
        lambda: _vs_floor(results, "W2", "durability=full", 0.7),
        lambda: _growth(
            results, "W5", "receive p50", "µs", DEEP_BACKLOG, "W5: receive latency flat in the backlog"
        ),
        lambda: _below(results, "W6", "wake-up p99", 20, "ms", "W6: long-poll wake-up p99 < 20 ms"),
        lambda: _below(
            results, "W6", "idle long-poll CPU", 2, "% of one core", "W6: idle long-poller < 2% of a core"
        ),
        lambda: _growth(
            results, "W7", "peak RSS", "MiB", FLAT_MEMORY, "W7: consumer memory flat in the backlog"
        ),
    ]
    return [check() for check in checks]
