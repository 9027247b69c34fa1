"""The long mode: ``python -m tests.reliability.stress --minutes N [--out FILE.json] [--seed S]``.

Runs the scenarios of the short mode again and again, bigger and longer,
until the time is up: crash rounds with hundreds of kills, dead-letter moves,
move tasks and migrations killed half-way, power-loss copies, many
processes at once, every fault and hostile input.  Every iteration uses a
fresh folder (kept, with its journals, when it fails) and the same checker
as the tests.  Prints and writes what it did; exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from .faults import (
    DAMAGES,
    READ_ONLY_CASES,
    check_damaged,
    check_disk_full,
    check_locked,
    check_read_only,
    damage,
    permissive_folder,
    sample_file,
    tmpfs_works,
)
from .fuzz import fuzz
from .migration import migration_run
from .move_task import move_task_run
from .power_loss import power_loss_run
from .scenarios import concurrency_run, crash_run, dead_letter_run

Scenario = Callable[[Path, random.Random], Counter[str]]


class Failed(AssertionError):
    """Some checks of an iteration failed; the figures of what it did still count."""

    def __init__(self, figures: Counter[str], failures: list[str]) -> None:
        super().__init__("; ".join(failures))
        self.figures = figures


def faults(folder: Path, rng: random.Random) -> Counter[str]:
    """Every fault once; a broken promise fails the iteration (after trying the others)."""
    figures: Counter[str] = Counter()
    failures: list[str] = []

    def attempt(name: str, run: Callable[[Path], object]) -> None:
        target = folder / name.replace(" ", "-")
        target.mkdir()
        try:
            run(target)
        except AssertionError as exc:
            failures.append(f"{name}: {str(exc).splitlines()[0]}")
        figures["faults"] += 1

    def damaged(target: Path, how: str) -> None:
        check_damaged(target / "damaged.db", damage(good, how, rng), how)

    def read_only(_: Path, case: str) -> None:
        with permissive_folder() as base:
            check_read_only(base / "data", case)

    for how in ("rlimit", "tmpfs") if tmpfs_works(folder) else ("rlimit",):
        attempt(f"disk full {how}", functools.partial(check_disk_full, how=how))
    good = sample_file(folder / "good.db")
    for how in DAMAGES:
        attempt(f"damaged {how}", functools.partial(damaged, how=how))
    for exclusive in (False, True):
        attempt(f"locked exclusive={exclusive}", functools.partial(check_locked, exclusive=exclusive))
    for case in READ_ONLY_CASES:
        attempt(f"read-only {case}", functools.partial(read_only, case=case))
    if failures:
        raise Failed(figures, failures)
    return figures


def bad_input(folder: Path, rng: random.Random) -> Counter[str]:
    offenders: Counter[str] = Counter()
    calls = fuzz(folder, max_examples=300, offenders=offenders)
    if offenders:
        raise Failed(Counter(hostile_calls=calls), [f"hostile arguments: {o}" for o in sorted(offenders)])
    return Counter(hostile_calls=calls)


SCENARIOS: dict[str, Scenario] = {
    "crash": lambda f, r: crash_run(f, r, rounds=5, seconds=20, every=(0.1, 0.5)),
    "dead letters": lambda f, r: dead_letter_run(f, r, rounds=3, seconds=15, every=(0.1, 0.5)),
    "concurrency": lambda f, r: concurrency_run(f, r, seconds=60, processes=r.choice([4, 6, 8])),
    "move task": lambda f, r: move_task_run(f, r, kills=6, messages=5000),
    "migration": lambda f, r: migration_run(f, r, kills=12, messages=100_000),
    "power loss": lambda f, r: power_loss_run(f, r, snapshots=20, every=(0.1, 1.5)),
    "faults": faults,
    "bad input": bad_input,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.stress", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--minutes", type=float, required=True, help="how long to run (the last iteration may overrun)"
    )
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument("--seed", type=int, default=None, help="seed of the harness's random choices")
    parser.add_argument(
        "--keep",
        type=Path,
        default=Path(tempfile.gettempdir()) / "durableq-stress",
        help="where the folders of failed iterations are kept",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.time()
    deadline = started + args.minutes * 60
    totals: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    failures: dict[str, list[str]] = {}
    names = list(SCENARIOS)
    iteration = 0
    while time.time() < deadline:
        name = names[iteration % len(names)]
        iteration += 1
        folder = Path(tempfile.mkdtemp(prefix=f"stress-{iteration:04d}-"))
        began = time.time()
        try:
            figures = SCENARIOS[name](folder, random.Random(rng.randrange(2**32)))
        except Exception as exc:  # noqa: BLE001 - recorded, kept, and the run goes on
            kept = args.keep / folder.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(folder), kept)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            failures.setdefault(name, []).append(f"{type(exc).__name__}: {first} (kept in {kept})")
            (kept / "failure.txt").write_text(traceback.format_exc())
            status = "FAILED"
            totals.update(getattr(exc, "figures", Counter()))
        else:
            shutil.rmtree(folder, ignore_errors=True)
            totals.update(figures)
            status = "ok"
        runs[name] += 1
        print(
            f"[{time.strftime('%H:%M:%S')}] {name:<13} {status:<6} {time.time() - began:6.1f} s  "
            f"totals {dict(totals)}",
            flush=True,
        )
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "minutes": round((time.time() - started) / 60, 1),
        "seed": seed,
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "system": platform.platform(),
        },
        "iterations": dict(runs),
        "totals": dict(totals),
        "failures": failures,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
