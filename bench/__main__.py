"""``python -m bench``: run the workloads, write ``results.md`` and the plots.

python -m bench                      # every workload, full sizes (about 15-25 minutes)
python -m bench --quick              # small sizes: a smoke test, not a measurement
python -m bench --workloads 1,2,5 --rounds 3 --out /tmp/results
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import report, targets
from .model import Config, WorkloadResult
from .workloads import WORKLOADS

log = logging.getLogger("bench")

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def _workload_numbers(text: str) -> list[int]:
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"--workloads takes numbers separated by commas, e.g. 1,2,5; got {text!r}"
        ) from exc
    unknown = sorted(set(numbers) - set(WORKLOADS))
    if unknown or not numbers:
        raise argparse.ArgumentTypeError(
            f"workloads are numbered {min(WORKLOADS)}-{max(WORKLOADS)}; got {text!r}"
        )
    return sorted(set(numbers))


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--rounds takes a whole number >= 1; got {text!r}")
    return int(text)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and 2 rounds: checks the harness runs"
    )
    parser.add_argument(
        "--workloads",
        type=_workload_numbers,
        default=sorted(WORKLOADS),
        help="which workloads, e.g. 1,2,5 (default: all)",
    )
    parser.add_argument("--rounds", type=_positive, help="rounds per workload (default 5; 2 with --quick)")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--scratch",
        type=Path,
        help="folder for the database files (default: the system temp folder). Its filesystem sets what an "
        "fsync costs: on tmpfs durability=full measures nothing",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database files after the run")
    return parser.parse_args(argv)


def _library() -> str:
    """Which durableq was measured: version, folder and, in a git checkout, the commit."""
    import durableq

    where = Path(durableq.__file__).resolve().parent
    text = f"durableq {durableq.__version__} from {where}"

    def git(*words: str) -> str:
        return subprocess.run(
            ["git", "-C", str(where), *words], capture_output=True, text=True, check=True
        ).stdout

    try:
        commit = git("rev-parse", "--short", "HEAD").strip()
        dirty = git("status", "--porcelain", "--", ".").strip()
    except (OSError, subprocess.CalledProcessError):
        return text  # not a git checkout (an installed package or a snapshot)
    return f"{text} at commit {commit}" + (" with uncommitted changes" if dirty else "")


def _about(cfg: Config, started: datetime.datetime, durations: dict[str, float]) -> dict[str, str]:
    import sqlite3

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "run": f"{started:%Y-%m-%d %H:%M} UTC, {sum(durations.values()) / 60:.1f} min "
        f"({', '.join(f'{k} {v:.0f} s' for k, v in durations.items())})",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average at the end {load}; "
        f"{platform.platform()}",
        "software": f"{_library()}; Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "settings": f"{'quick' if cfg.quick else 'full'} sizes, {cfg.rounds} rounds, "
        f"database files in {cfg.workdir.parent}",
        "how to read": "value = median over rounds (or as the note says); spread = lowest – highest round; "
        "× ref = speed relative to the reference system, as the median of per-round ratios. "
        "Compare ratios, not absolute numbers, across runs: the machine is shared.",
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Progress of the harness only (the "bench" loggers); the library's own INFO lines are not ours to show.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    workdir = Path(tempfile.mkdtemp(prefix="durableq-bench-", dir=args.scratch))
    cfg = Config(rounds=args.rounds or (2 if args.quick else 5), quick=args.quick, workdir=workdir)
    started = datetime.datetime.now(datetime.UTC)
    results: list[WorkloadResult] = []
    durations: dict[str, float] = {}
    failed: list[str] = []
    try:
        for number in args.workloads:
            key = f"W{number}"
            log.info("%s: starting", key)
            start = time.monotonic()
            try:
                results.append(WORKLOADS[number].run(cfg))
            except Exception as exc:  # one broken workload must not cost the others their results
                log.exception("%s failed", key)
                failed.append(key)
                results.append(WorkloadResult(key, "failed", f"The workload failed: `{exc!r}`", []))
            durations[key] = time.monotonic() - start
            log.info("%s: done in %.0f s", key, durations[key])
    finally:
        if args.keep:
            log.info("database files kept in %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("w*.png"):  # plots of workloads not run this time would mislead
        stale.unlink()
    plots = {r.key: path for r in results if (path := report.plot(r, out)) is not None}
    markdown = out / "results.md"
    report.write_markdown(
        markdown, results, targets.evaluate(results), plots, _about(cfg, started, durations)
    )
    log.info("wrote %s", markdown)
    print(markdown)
    if failed:
        log.error("failed workloads: %s (see above and %s)", ", ".join(failed), markdown)
        return 1
    return 0


if __name__ == "__main__":  # the guard also keeps spawned children from re-running the harness
    sys.exit(main())
