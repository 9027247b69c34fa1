"""What a workload produces: measurements per (case, system, metric), and the run's settings."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

T = TypeVar("T")

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Config:
    """Settings every workload reads."""

    rounds: int
    quick: bool
    #: Scratch folder for the database files (its filesystem decides what an fsync costs).
    workdir: Path

    def pick(self, full: T, quick: T) -> T:
        """A size: ``quick`` for the smoke test, ``full`` otherwise."""
        return quick if self.quick else full

    def path(self, *parts: str) -> Path:
        """A fresh name in the scratch folder (files of one workload never collide with another's)."""
        return self.workdir / "-".join(part.replace("=", "_") for part in parts)


@dataclass
class Measurement:
    """One metric of one system in one case; ``samples`` holds one value per round."""

    case: str
    system: str
    metric: str
    unit: str
    samples: list[float] = field(default_factory=list)
    better: Better = "higher"
    #: The headline value when it is not the median of the rounds (e.g. a percentile of pooled samples).
    headline: float | None = None
    #: Shown instead of numbers, e.g. "not installed" or "n/a: no batch API".
    status: str = ""
    note: str = ""

    @property
    def value(self) -> float | None:
        if self.headline is not None:
            return self.headline
        return statistics.median(self.samples) if self.samples else None


@dataclass
class WorkloadResult:
    key: str  # "W1"
    title: str
    what: str  # one sentence: what was measured and how
    measurements: list[Measurement]
    #: The system the "× ref" column compares with, if any ("floor", or "standard" for W8).
    reference: str | None = "floor"
    notes: list[str] = field(default_factory=list)
    #: Raw values worth seeing whole (label with unit, values), drawn as a cumulative distribution.
    distribution: tuple[str, list[float]] | None = None
    #: Cases whose reference is not ``reference`` (None: nothing to compare with in that case).
    case_references: dict[str, str | None] = field(default_factory=dict)
    #: Metrics shown without "× ref" (e.g. a memory growth near zero on both sides: a ratio of noise).
    unrated: tuple[str, ...] = ()

    def reference_for(self, case: str, metric: str) -> str | None:
        """The system "× ref" compares with in ``case`` for ``metric`` (None: no comparison)."""
        if metric in self.unrated:
            return None
        return self.case_references.get(case, self.reference)

    def find(self, case: str, system: str, metric: str) -> Measurement | None:
        for m in self.measurements:
            if (m.case, m.system, m.metric) == (case, system, metric):
                return m
        return None

    def cases(self) -> list[str]:
        return list(dict.fromkeys(m.case for m in self.measurements))


@dataclass(frozen=True)
class Workload:
    number: int
    run: Callable[[Config], WorkloadResult]


def speed(value: float, reference: float, better: Better) -> float:
    """How fast ``value`` is relative to ``reference``: above 1 is faster, whatever the unit."""
    return value / reference if better == "higher" else reference / value


def ratio(m: Measurement, ref: Measurement) -> float | None:
    """``m``'s speed relative to ``ref``.

    When both ran the same rounds, the median of the per-round ratios: the
    systems alternate, so each pair ran side by side, and a noisy neighbour
    that slows one round slows both sides of that round's ratio.
    """
    if m.value is None or ref.value is None or m.value == 0 or ref.value == 0:
        return None
    paired = m.headline is None and ref.headline is None and len(m.samples) == len(ref.samples) > 0
    if paired and all(m.samples) and all(ref.samples):
        return statistics.median(speed(a, b, m.better) for a, b in zip(m.samples, ref.samples))
    return speed(m.value, ref.value, m.better)


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation, as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
