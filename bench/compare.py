"""Running several systems in alternating rounds: floor, durableq, peers, floor, durableq, ..."""

from __future__ import annotations

import logging
import statistics
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


def in_rounds(rounds: int, label: str, one_round: Callable[[], dict[K, R]]) -> dict[K, list[R]]:
    """Run ``one_round`` (every contender once or more, in turn) ``rounds`` times; each
    contender's results by round."""
    results: dict[K, list[R]] = {}
    for r in range(rounds):
        log.info("%s: round %d/%d", label, r + 1, rounds)
        for contender, value in one_round().items():
            results.setdefault(contender, []).append(value)
    return results


def alternate(contenders: Sequence[K], rounds: int, run: Callable[[K], R], label: str) -> dict[K, list[R]]:
    """Each round runs every contender once, in turn, so a slow stretch of a noisy machine
    falls on all of them rather than on whichever happened to run then."""
    return in_rounds(rounds, label, lambda: {contender: run(contender) for contender in contenders})


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
    turns: int = 1,
) -> list[Measurement]:
    """Open each system on its own fresh file, warm it up, then run ``run`` (which returns a
    rate per metric) in alternating rounds.  Systems that cannot run get a status row.

    Inside a round the systems take ``turns`` turns each (floor, durableq, ..., floor,
    durableq, ...), so a burst of load shorter than a round still falls on all of them; a
    round's rate is its turns' messages over their time (the harmonic mean of equal turns).
    """
    skipped = unavailable(systems, batches)
    runnable = [name for name in systems if name not in skipped]
    adapters: dict[str, Adapter] = {}

    def one_round() -> dict[str, dict[str, float]]:
        rates: dict[str, list[dict[str, float]]] = {name: [] for name in runnable}
        for _turn in range(turns):
            for name in runnable:
                rates[name].append(run(adapters[name]))
        return {
            name: {m.name: statistics.harmonic_mean([turn[m.name] for turn in per_turn]) for m in metrics}
            for name, per_turn in rates.items()
        }

    try:
        for name in runnable:
            adapters[name] = SystemSpec(name, cfg.path(key, case, name), durability).open()
            warmup(adapters[name])
        results = in_rounds(cfg.rounds, f"{key} {case}", one_round)
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
    turns: int = 1,
) -> list[Measurement]:
    """:func:`compare` once per durability level in ``counts`` (level -> the work of one turn)."""
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
            turns=turns,
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
