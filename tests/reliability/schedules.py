"""Schedules under SIGKILL (issue 33): several ``durableq scheduler`` processes on one database, a
one-second rate, schedulers SIGKILLed at random and restarted; every scheduled time arrives exactly
once.

The schedule catches up with ``catch_up="all"``, so a moment when no scheduler ran leaves no gap:
after the run, the queue must hold one message per second from the first tick to the last one sent
(the schedule's ``last_fire``), no time twice and none missing.  The processes are the real command
line, stopped at the end with SIGTERM (each must exit 0: the clean stop).

The tests run this briefly on both engines; ``python -m tests.reliability.schedules --minutes N``
runs it for N minutes per engine (on a SQLite file and on a throw-away PostgreSQL cluster) and
prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import durableq

QUEUE = "ticks"
SCHEDULE = "every-second"
_COMMAND = "from durableq.cli import main; main()"


def _scheduler(db: str, stderr: Path) -> subprocess.Popen[bytes]:
    """``durableq --db DB scheduler`` in a session of its own (a kill stays local)."""
    with open(stderr, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-c", _COMMAND, "--db", db, "scheduler", "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def run(
    db: str, folder: Path, rng: random.Random, seconds: float, schedulers: int = 3, kills: int = 1
) -> dict[str, Any]:
    """Schedulers on ``db`` for ``seconds``, ``kills`` of them SIGKILLed (each at a random moment of
    its share of the run) and restarted; returns the figures, after checking every second arrived once."""
    with durableq.open(db) as broker:
        broker.create_queue(QUEUE)
        first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        broker.create_schedule(SCHEDULE, QUEUE, "rate(1 second)", "tick", start=first, catch_up="all")
    stderr = folder / "schedulers.err"
    processes = [_scheduler(db, stderr) for _ in range(schedulers)]
    try:
        share = seconds / (kills + 1)
        for _ in range(kills):
            time.sleep(rng.uniform(share * 0.5, share * 1.5))  # the workload's length, not a wait for state
            victim = rng.randrange(schedulers)
            os.kill(processes[victim].pid, signal.SIGKILL)
            processes[victim].wait()
            processes[victim] = _scheduler(db, stderr)
        time.sleep(max(0.0, seconds - share * kills))
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=60) for process in processes]
    assert codes == [0] * schedulers, f"schedulers exited {codes}: {stderr.read_text()}"
    return _check(db, first)


def _check(db: str, first: datetime) -> dict[str, Any]:
    with durableq.open(db) as broker:
        last = broker.get_schedule(SCHEDULE).last_fire
        assert last is not None, "no tick was sent"
        queue = broker.get_queue(QUEUE)
        arrived: Counter[str] = Counter()
        while batch := queue.receive(10):
            for message in batch:
                arrived[str(message.attributes["DurableQ.ScheduledTime"].value)] += 1
                queue.delete(message.receipt_handle)
    expected = int((last - first).total_seconds()) + 1
    times = [(first + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ") for n in range(expected)]
    twice = sorted(t for t, n in arrived.items() if n > 1)
    missing = sorted(set(times) - set(arrived))
    strange = sorted(set(arrived) - set(times))
    assert (twice, missing, strange) == ([], [], []), (
        f"twice {twice}, missing {missing}, unexpected {strange}"
    )
    return {"ticks": expected, "arrived": sum(arrived.values())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=5, help="per engine")
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "all"), default="all")
    parser.add_argument("--schedulers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    engines = ("sqlite", "postgresql") if args.engine == "all" else (args.engine,)
    figures: dict[str, Any] = {"seed": args.seed}
    with tempfile.TemporaryDirectory(prefix="durableq-schedules-") as scratch:
        Path(scratch).chmod(0o711)  # (a PostgreSQL server running as another user reaches its data)
        for engine in engines:
            figures[engine] = _engine_run(engine, Path(scratch), rng, args.minutes * 60, args.schedulers)
            print(f"{engine}: {json.dumps(figures[engine])}", flush=True)
    print(json.dumps(figures, indent=2))


def _engine_run(
    engine: str, folder: Path, rng: random.Random, seconds: float, schedulers: int
) -> dict[str, Any]:
    from tests import pgcluster

    cluster = pgcluster.start(fsync=True, parent=folder) if engine == "postgresql" else None
    try:
        db = (
            str(folder / "schedules.db")
            if cluster is None
            else cluster.url(pgcluster.create_database(cluster))
        )
        kills = max(1, int(seconds // 10))  # one kill every ten seconds or so
        figures = run(db, folder, rng, seconds, schedulers, kills)
        return {**figures, "kills": kills, "schedulers": schedulers}
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
