"""Running several systems in alternating rounds: floor, durableq, peers, floor, durableq, ..."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from .model import Better, Config, Measurement
from .systems import ALL_SYSTEMS, Adapter, SystemSpec, missing, supports_batches

log = logging.getLogger(__name__)

K = TypeVar("K")
R = TypeVar("R")


class Metric(NamedTuple):
    name: str
    unit: str
    better: Better = "higher"
    #: A correctness count (duplicates, losses): reported as the sum over rounds, since one bad
    #: round is one too many, rather than as a median that would hide it.
    summed: bool = False


Run = Callable[[Adapter], dict[str, float]]
#: Work done once, untimed, before the rounds: statement caches, first pages, lazy imports.
WARMUP = 20


def alternate(contenders: Sequence[K], rounds: int, run: Callable[[K], R], label: str) -> dict[K, list[R]]:
    """Each round runs every contender once, in turn, so a slow stretch of a noisy machine
    falls on all of them rather than on whichever happened to run then."""
    results: dict[K, list[R]] = {c: [] for c in contenders}
    for r in range(rounds):
        log.info("%s: round %d/%d", label, r + 1, rounds)
        for contender in contenders:
            results[contender].append(run(contender))
    return results


def compare(
    cfg: Config,
    key: str,
    case: str,
    durability: str,
    metrics: Sequence[Metric],
    run: Run,
    *,
    warmup: Callable[[Adapter], object],
    systems: Sequence[str] = ALL_SYSTEMS,
    batches: bool = False,
) -> list[Measurement]:
    """Open each system on its own fresh file, warm it up, then run ``run`` (which returns a
    value per metric) in alternating rounds.  Systems that cannot run get a status row."""
    skipped = unavailable(systems, batches)
    runnable = [name for name in systems if name not in skipped]
    adapters: dict[str, Adapter] = {}
    try:
        for name in runnable:
            adapters[name] = SystemSpec(name, cfg.path(key, case, name), durability).open()
            warmup(adapters[name])
        results = alternate(runnable, cfg.rounds, lambda name: run(adapters[name]), f"{key} {case}")
    finally:
        for adapter in adapters.values():
            adapter.close()
    return collect(case, systems, metrics, results, skipped)


def by_durability(
    cfg: Config,
    key: str,
    counts: dict[str, int],
    metrics: Sequence[Metric],
    make_run: Callable[[int], Run],
    *,
    batches: bool = False,
) -> list[Measurement]:
    """:func:`compare` once per durability level in ``counts`` (level -> how much work a round does)."""
    measurements: list[Measurement] = []
    for durability, count in counts.items():
        measurements += compare(
            cfg,
            key,
            f"durability={durability}",
            durability,
            metrics,
            make_run(count),
            warmup=make_run(WARMUP),
            batches=batches,
        )
    return measurements


def unavailable(systems: Sequence[str], batches: bool = False) -> dict[str, str]:
    """The systems that cannot run here, with the reason the report shows instead of numbers."""
    skipped = {}
    for name in systems:
        reason = missing(name) or ("n/a: no batch API" if batches and not supports_batches(name) else None)
        if reason:
            skipped[name] = reason
    return skipped


def collect(
    case: str,
    systems: Sequence[str],
    metrics: Sequence[Metric],
    results: dict[str, list[dict[str, float]]],
    skipped: dict[str, str],
) -> list[Measurement]:
    """Measurements (one per system and metric, in that order) from per-round values."""
    measurements = []
    for name in systems:
        for metric in metrics:
            samples = [values[metric.name] for values in results.get(name, [])]
            measurements.append(
                Measurement(
                    case,
                    name,
                    metric.name,
                    metric.unit,
                    samples=samples,
                    better=metric.better,
                    headline=sum(samples) if metric.summed and samples else None,
                    status=skipped.get(name, ""),
                    note="sum over rounds" if metric.summed else "",
                )
            )
    return measurements
