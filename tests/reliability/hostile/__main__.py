"""The long mode: ``python -m tests.reliability.hostile --minutes N --engine sqlite|postgresql|endpoint|all``.

Runs hostile runs again and again until the time is up, bigger than the short mode's (more
processes, longer rounds), each in a fresh folder (kept, with its journals and a report, when it
fails), cycling through the engines asked for: ``sqlite`` (a file), ``postgresql`` (a fresh
database of a throw-away cluster, see tests/pgcluster.py), ``endpoint`` (``durableq serve`` on a
file, driven by boto3).  Prints the seed and each run's figures; ``--seed`` (or DURABLEQ_SEED)
replays the harness's choices.  Exits 1, listing every broken promise, if any run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .oracle import summary
from .run import Broken, endpoint_run, library_run

ENGINES = ("sqlite", "postgresql", "endpoint")


@contextmanager
def _postgres() -> Iterator[Callable[[], str]]:
    """A throw-away cluster; the function makes a fresh migrated database in it (a URL)."""
    import durableq
    from tests import pgcluster

    cluster = pgcluster.start(fsync=False)
    try:

        def fresh() -> str:
            url = cluster.url(pgcluster.create_database(cluster))
            durableq.open(url).close()
            return url

        yield fresh
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.hostile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--minutes", type=float, required=True, help="how long (the last run may overrun)")
    parser.add_argument("--engine", choices=[*ENGINES, "all"], default="all")
    parser.add_argument("--seconds", type=float, default=60, help="length of one run's chaos (default 60)")
    parser.add_argument("--processes", type=int, default=4, help="hostile (or client) processes per run")
    parser.add_argument("--threads", type=int, default=4, help="threads per process")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, help="also write the figures and failures here as JSON")
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "durableq-hostile")
    args = parser.parse_args(argv)
    seed = (
        args.seed
        if args.seed is not None
        else int(os.environ.get("DURABLEQ_SEED") or random.randrange(2**32))
    )
    print(f"hostile mix: seed {seed} (DURABLEQ_SEED={seed} or --seed {seed} replays the harness's choices)")
    rng = random.Random(seed)
    engines = list(ENGINES) if args.engine == "all" else [args.engine]
    deadline = time.time() + args.minutes * 60
    totals: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    failures: dict[str, list[str]] = {}
    with _postgres() if "postgresql" in engines else _nothing() as fresh:
        number = 0
        while time.time() < deadline:
            engine = engines[number % len(engines)]
            number += 1
            folder = Path(tempfile.mkdtemp(prefix=f"hostile-{number:04d}-{engine}-"))
            options = {
                "seconds": args.seconds,
                "threads": args.threads,
                "rng": random.Random(rng.randrange(2**32)),
            }
            began = time.time()
            try:
                if engine == "endpoint":
                    figures = endpoint_run(folder, clients=args.processes, **options)  # type: ignore[arg-type]
                else:
                    db = fresh() if engine == "postgresql" else None
                    figures = library_run(folder, db=db, processes=args.processes, **options)  # type: ignore[arg-type]
            except Broken as exc:
                kept = args.keep / folder.name
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(folder), kept)
                (kept / "report.txt").write_text(str(exc) + "\n")
                failures.setdefault(engine, []).append(f"{str(exc).splitlines()[0]} (kept in {kept})")
                print(str(exc), flush=True)
                figures, status = exc.figures, "FAILED"
            except Exception as exc:  # noqa: BLE001 - the harness itself failed: recorded, kept, go on
                kept = args.keep / folder.name
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(folder), kept)
                failures.setdefault(engine, []).append(f"{type(exc).__name__}: {exc} (kept in {kept})")
                figures, status = Counter(), "ERROR"
            else:
                shutil.rmtree(folder, ignore_errors=True)
                status = "ok"
            totals.update(figures)
            runs[engine] += 1
            print(
                f"[{time.strftime('%H:%M:%S')}] {engine:<10} {status:<6} {time.time() - began:6.1f} s",
                flush=True,
            )
    report = {"seed": seed, "runs": dict(runs), "figures": summary(totals), "failures": failures}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 1 if failures else 0


@contextmanager
def _nothing() -> Iterator[Callable[[], str]]:
    yield lambda: ""


if __name__ == "__main__":
    sys.exit(main())
