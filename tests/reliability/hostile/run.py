"""A hostile run: the mix in several processes, SIGKILLed and restarted at random, then a drain and
every check.  :func:`library_run` drives the library (a SQLite file or a PostgreSQL database);
:func:`endpoint_run` drives ``durableq serve`` with boto3 clients (:mod:`.wire`).

Each returns its figures and raises :class:`Broken` listing every broken promise it found (all of
them, not the first): processes that crashed, hung or failed, and what :func:`.oracle.judge` found.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .. import store
from ..checker import Problems
from ..fleet import Fleet, Slot
from . import layout
from .endpoint import Server
from .oracle import EventTail, blank, judge
from .role import EARLY_CHILD

#: A process this young is not killed (see role.EARLY_CHILD).
YOUNG = EARLY_CHILD + 3

#: The padding of large bodies, shortened in reports.
_LONG = re.compile(r"b{40,}")
_EXAMPLES = 1
#: Broken promises listed first: about messages, events, files, or processes that died or hung.
_GRAVE = (
    "LOST",
    "BACK",
    "TWO HOLDERS",
    "TWICE",
    "CRASH",
    "HANG",
    "EVENTS",
    "NOT A PAYLOAD",
    "DUPLICATE",
    "PHANTOM",
    "INTEGRITY",
    "TORN",
    "MISPLACED",
    "NEVER DELIVERED",
    "LEFT",
    "ORDER",
    "GROUP HELD",
    "HISTORY",
)


class Broken(AssertionError):
    """A run broke promises; ``figures`` still tell what it did."""

    def __init__(self, where: str, problems: Problems, figures: Counter[str]) -> None:
        self.figures = figures
        self.problems = [
            _LONG.sub(lambda m: f"{m[0][:8]}...({len(m[0])} chars)", text) for text in problems.found
        ]
        kinds: dict[str, list[str]] = {}
        for text in self.problems:
            kinds.setdefault(blank(text), []).append(text)
        lines = [f"{len(self.problems)} broken promises in {where}, {len(kinds)} kinds:"]
        for found in sorted(kinds.values(), key=lambda texts: (not texts[0].startswith(_GRAVE), -len(texts))):
            lines.append(f"- {len(found)} x {blank(found[0])}")
            lines += [f"    e.g. {text}" for text in found[:_EXAMPLES]]
        super().__init__("\n".join(lines))


def ended(fleet: Fleet, slot: Slot, failures: list[str]) -> bool:
    """Has ``slot``'s process ended by itself?  A non-zero exit (a crash, a hang the watchdog
    caught, a signal) is a failure, with the end of its stderr."""
    process = slot.process
    if process is None or slot.finished or process.poll() is None:
        return False
    slot.finished = True
    code = process.returncode
    if code != 0:
        how = f"died of {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        err = slot.journals[-1].with_suffix(".err").read_text(errors="replace")
        fatal = err.find("Fatal Python error")  # faulthandler's report: the crashing thread's stack first
        shown = err[fatal : fatal + 3000] if fatal >= 0 else err[-2500:]
        failures.append(f"CRASH: {slot.journals[-1].name} {how}:\n{shown}")
    return True


def kill(fleet: Fleet, slot: Slot) -> None:
    """SIGKILL ``slot``'s whole process group: the process, its forked children and worker processes
    (a child left behind could hold the database's write lock)."""
    process = slot.process
    if process is not None and process.poll() is None:
        fleet.kills += 1
    if process is not None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    slot.finished = True


def kill_all(fleet: Fleet, failures: list[str]) -> None:
    for slot in fleet.slots.values():
        ended(fleet, slot, failures)
        kill(fleet, slot)


def chaos(
    fleet: Fleet,
    seconds: float,
    every: tuple[float, float],
    failures: list[str],
    only: list[str] | None = None,
    server: Server | None = None,
) -> int:
    """For ``seconds``: restart processes that ended (noting failures) and SIGKILL one at random
    every ``every`` seconds (the endpoint ``server`` too, about one time in three: its first
    moments with a full load of clients are hostile ground of their own); returns how many
    processes started."""
    started = 0
    born = {name: time.monotonic() for name in fleet.slots}
    deadline = time.monotonic() + seconds
    next_kill = time.monotonic() + fleet.rng.uniform(*every)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        for slot in fleet.slots.values():
            if ended(fleet, slot, failures):
                fleet.start(slot)
                born[slot.name] = time.monotonic()
                started += 1
        if server is not None and server.process is not None and server.process.poll() is not None:
            failures.append(f"CRASH: the endpoint exited with {server.process.returncode} (see its .err)")
            server.start()
        if time.monotonic() >= next_kill:
            next_kill = time.monotonic() + fleet.rng.uniform(*every)
            if server is not None and fleet.rng.random() < 0.3:
                server.kill()
                fleet.kills += 1
                server.start()
                continue
            # Not in its first seconds: the child of its early fork must be seen to end.
            old = time.monotonic() - YOUNG
            victims = [s for s in fleet.running() if (only is None or s.name in only) and born[s.name] < old]
            if victims:
                victim = fleet.rng.choice(victims)
                kill(fleet, victim)
                fleet.start(victim)
                born[victim.name] = time.monotonic()
                started += 1
    for slot in fleet.slots.values():
        ended(fleet, slot, failures)
    return started


def finish(fleet: Fleet, failures: list[str], base: dict[str, Any], drain_seconds: float) -> None:
    """Kill everything, then drain the checked queues with one process that is not killed."""
    kill_all(fleet, failures)
    drain = fleet.add("drain", **base, mode="drain", drain_seconds=drain_seconds)
    deadline = time.monotonic() + drain_seconds + 60
    while not ended(fleet, drain, failures):
        if time.monotonic() > deadline:
            failures.append(f"HANG: the drain did not finish within {drain_seconds + 60:g} s")
            break
        time.sleep(0.1)
    kill_all(fleet, failures)


def conclude(
    place: layout.Place, fleet: Fleet, tail: EventTail, failures: list[str], figures: Counter[str], where: str
) -> Counter[str]:
    tail.finish()
    judged, problems = judge(place, fleet.folder, drained=not failures, tail=tail)
    figures.update(judged)
    figures["kills"] += fleet.kills
    problems.found[:0] = failures
    if problems.found:
        raise Broken(where, problems, figures)
    return figures


def library_run(
    folder: Path,
    rng: random.Random,
    seconds: float,
    *,
    db: str | None = None,
    processes: int = 3,
    threads: int = 4,
    every: tuple[float, float] = (0.5, 2.0),
    lifetime: tuple[float, float] = (4.0, 10.0),
    hang: float = 60,
    drain_seconds: float = 240,
) -> Counter[str]:
    """``processes`` hostile processes of ``threads`` threads each for ``seconds`` on ``db`` (a
    SQLite file in ``folder`` if None, or a PostgreSQL URL of an empty migrated database)."""
    place = layout.prepare(folder, rng, db)
    layout.create_queues(place)
    on_pg = store.on_postgres(place.db)
    base = {
        "role": "hostile",
        "db": place.db,
        "keyring": place.keyring,
        "payload_dir": place.payload_dir,
        "folder": str(folder),
        "hang": hang,
    }
    failures: list[str] = []
    figures: Counter[str] = Counter()
    where = f"hostile run on {'PostgreSQL' if on_pg else 'SQLite'} (payload store: {place.how})"
    with EventTail(place) as tail, Fleet(folder / "journals", rng) as fleet:
        for number in range(processes):
            fleet.add(
                f"hostile-{number}",
                **base,
                threads=threads,
                # The first lives through the run (so its watchdog can see a hang); the others
                # stop by themselves after a while, or are killed first.
                lifetime=None if number == 0 else lifetime,
                second=number % 2 == 1,  # two brokers on one database in one process
                tight=number == 0,  # and a thread on a broker with a tiny busy timeout
            )
        mortal = [f"hostile-{number}" for number in range(1, processes)]
        figures["processes"] = processes + chaos(fleet, seconds, every, failures, only=mortal)
        finish(fleet, failures, base, drain_seconds)
    return conclude(place, fleet, tail, failures, figures, where)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def endpoint_run(
    folder: Path,
    rng: random.Random,
    seconds: float,
    *,
    db: str | None = None,
    clients: int = 3,
    threads: int = 4,
    every: tuple[float, float] = (0.5, 2.0),
    lifetime: tuple[float, float] = (4.0, 10.0),
    hang: float = 60,
    drain_seconds: float = 240,
) -> Counter[str]:
    """``durableq serve`` on ``db`` (as :func:`library_run`), SigV4 required, driven by
    ``clients`` processes of ``threads`` boto3 clients each; clients and server SIGKILLed at random."""
    place = layout.prepare(folder, rng, db)
    layout.create_queues(place)
    journals = folder / "journals"
    journals.mkdir(parents=True, exist_ok=True)
    server = Server(place, journals, _free_port())
    server.start()
    base = {
        "role": "hostile",
        "db": place.db,
        "keyring": place.keyring,
        "payload_dir": place.payload_dir,
        "folder": str(folder),
        "hang": hang,
    }
    failures: list[str] = []
    figures: Counter[str] = Counter()
    engine = "PostgreSQL" if store.on_postgres(place.db) else "SQLite"
    where = f"hostile run through the endpoint on {engine} (payload store: {place.how})"
    try:
        with EventTail(place) as tail, Fleet(journals, rng) as fleet:
            for number in range(clients):
                fleet.add(
                    f"client-{number}",
                    **{**base, "role": "hostile_client"},
                    url=server.url,
                    threads=threads,
                    lifetime=None if number == 0 else lifetime,
                )
            figures["processes"] = clients + chaos(fleet, seconds, every, failures, server=server)
            kill_all(fleet, failures)
            stopped = server.stop()
            if stopped is not None:
                failures.append(stopped)
            figures["endpoint runs"] = server.runs
            finish(fleet, failures, base, drain_seconds)
    finally:
        server.kill()
    return conclude(place, fleet, tail, failures, figures, where)
