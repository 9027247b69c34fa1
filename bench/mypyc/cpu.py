"""CPU time per W1 cycle (send, receive, delete one message) of the bench's systems, in one process.

The systems take turns in chunks of ``CHUNK`` cycles, so a change in the machine's load falls on all
of them alike: compare the ratios a run prints, not its microseconds.

    python -m bench.mypyc.cpu CYCLES DURABILITY SYSTEM,SYSTEM,...   # the first system is the reference
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import durableq.ops.send

from ..systems import Adapter, DurableQ, Floor, LiteQueue, PersistQueue

SYSTEMS: dict[str, type[Adapter]] = {
    "durableq": DurableQ,
    "floor": Floor,
    "litequeue": LiteQueue,
    "persistqueue": PersistQueue,
}
BODY = "x" * 100
CHUNK = 500
WARM_UP = 200


def cycles(adapter: Adapter, count: int) -> float:
    """CPU seconds of ``count`` cycles."""
    start = time.process_time()
    for _ in range(count):
        adapter.send(BODY)
        adapter.delete(adapter.receive_one().token)
    return time.process_time() - start


def main(count: int, durability: str, names: list[str], scratch: str | None = None) -> None:
    adapters: dict[str, Adapter] = {}
    for name in names:
        folder = Path(tempfile.mkdtemp(dir=scratch))
        adapters[name] = SYSTEMS[name](folder / "queue.db", durability)
        cycles(adapters[name], WARM_UP)
    spent = dict.fromkeys(names, 0.0)
    for _ in range(max(1, count // CHUNK)):
        for name, adapter in adapters.items():
            spent[name] += cycles(adapter, CHUNK)
    build = "compiled" if durableq.ops.send.__file__.endswith(".so") else "pure"
    micros = {name: seconds / (max(1, count // CHUNK) * CHUNK) * 1e6 for name, seconds in spent.items()}
    reference = names[0]
    print(
        build,
        " ".join(f"{name}={value:.1f}µs" for name, value in micros.items()),
        " ".join(f"{name}/{reference}={micros[name] / micros[reference]:.2f}" for name in names[1:]),
        flush=True,
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4] if len(sys.argv) > 4 else None)
