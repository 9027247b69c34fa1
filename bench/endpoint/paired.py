"""``python -m bench.endpoint.paired``: one client against several builds of the endpoint, interleaved.

A change to the endpoint's own cost is a few tens of microseconds per request
on a machine whose load moves more than that between runs, so each build is
measured in turn within one run, round after round, the order rotating, and
each figure is the median over the rounds:

    python -m bench.endpoint.paired --tree before=/tmp/before --tree after=. \
        --tree old=/tmp/old --durability normal --rounds 6

``--tree NAME=PATH`` runs ``python -m durableq.server`` from the source tree
PATH (a folder holding ``durableq/``; ``.`` is this checkout).  The phases are
W9's (``scenarios.throughput``) with one client: send, receive, delete, cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from . import scenarios, servers

PHASES = ("send", "receive", "delete", "cycle")


def _serve(tree: Path, db: Path, port: int, durability: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    argv = [sys.executable, "-m", "durableq.server", "--db", str(db), "--port", str(port)]
    argv += ["--durability", durability]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tree)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.endpoint.paired")
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--durability", default="normal", choices=("normal", "full"))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=1500)
    parser.add_argument("--cap", type=float, default=10.0)
    parser.add_argument("--clients", default="1", help="client counts, e.g. 1,16 (default 1)")
    parser.add_argument("--scratch", type=Path, default=None)
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        for r in range(args.rounds):
            for name, tree in trees[r % len(trees) :] + trees[: r % len(trees)]:
                port = servers.free_port()
                process = _serve(tree, Path(scratch) / f"{name}-{r}.db", port, args.durability)
                try:
                    servers._wait_for_port(port, process)
                    running = servers.Running(name, "127.0.0.1", port, process)
                    for count in counts:
                        cpu = psutil.Process(process.pid).cpu_times()
                        phases = asyncio.run(scenarios.throughput(running, count, args.messages, args.cap))
                        spent = psutil.Process(process.pid).cpu_times()
                        # Each phase does `messages` requests (three for a cycle), unless the cap ended it.
                        used = spent.user + spent.system - cpu.user - cpu.system
                        found.setdefault((name, f"cpu{count}"), []).append(
                            (used / (6 * args.messages) * 1e6, 0)
                        )
                        for phase, result in phases.items():
                            found.setdefault((name, f"{phase}{count}"), []).append((result.p50, result.rate))
                        print(
                            f"round {r + 1} {name}, {count} clients: server CPU "
                            f"{used / (6 * args.messages) * 1e6:.0f} us/request, "
                            + ", ".join(
                                f"{p} {phases[p].p50:.3f} ms {phases[p].rate:,.0f}/s" for p in PHASES
                            ),
                            flush=True,
                        )
                finally:
                    process.terminate()
                    process.wait(30)
    print(f"\nmedian over {args.rounds} rounds, durability {args.durability}: p50 ms (ops/s)")
    print("| | " + " | ".join(name for name, _ in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for count in counts:
        for phase in PHASES:
            cells = []
            for name, _ in trees:
                runs = found.get((name, f"{phase}{count}"), [])
                p50 = statistics.median(p for p, _ in runs)
                rate = statistics.median(r for _, r in runs)
                cells.append(f"{p50:.3f} ({rate:,.0f})")
            print(f"| {phase}, {count} client{'s' if count > 1 else ''} | " + " | ".join(cells) + " |")
        cpu = [statistics.median(c for c, _ in found[(name, f"cpu{count}")]) for name, _ in trees]
        print(f"| server CPU per request (us), {count} | " + " | ".join(f"{c:.0f}" for c in cpu) + " |")


if __name__ == "__main__":
    main()
