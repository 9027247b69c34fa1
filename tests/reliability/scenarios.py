"""Runs of real processes on one database, checked after every round.

The tests run them briefly; ``python -m tests.reliability.stress`` runs them
again and again for hours.  Each returns its figures (kills, messages
checked, ...) and raises AssertionError on the first round that breaks an
invariant.

A run's database is a SQLite file in its folder unless ``db`` names another
location: a SQLite path or a ``postgresql://`` URL (of a database migrated to
head, holding no queues), which the role processes open as they would a file.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import durableq
from durableq import RedrivePolicy
from tests.conftest import until

from . import store
from .checker import check_file
from .fleet import Fleet

STANDARD = "std"
FIFO = "ordered.fifo"
GROUPS = [f"g{i}" for i in range(5)]
#: Short visibility timeouts, so that messages a killed process held come back within a round.
VISIBILITY = 2


def create_queues(db: store.Location, **extra: Any) -> None:
    with durableq.open(db) as broker:
        broker.create_queue(STANDARD, visibility_timeout=VISIBILITY, **extra)
        broker.create_queue(
            FIFO, fifo=True, content_based_deduplication=True, visibility_timeout=VISIBILITY, **extra
        )


def _drain(fleet: Fleet, db: str, queues: list[str], **config: Any) -> None:
    """Consumers, never killed, until the queues are empty."""
    for name in queues:
        fleet.add(f"drain-{name}", role="consumer", db=db, queue=name, drain=True, **config)
    fleet.wait_all(timeout=300)
    fleet.raise_failures()


def _rounds(
    fleet: Fleet, rounds: int, seconds: float, every: tuple[float, float], check: Any
) -> Counter[str]:
    """Kill at random for ``seconds``, kill everything, check; ``rounds`` times.

    Returns the rounds and the messages checked, summed over the rounds (each
    round checks every message so far); the last check's figures come on top.
    """
    figures: Counter[str] = Counter()
    for number in range(rounds):
        if number:
            for slot in fleet.slots.values():
                fleet.start(slot)
        fleet.chaos(seconds, every)
        fleet.kill_all()
        fleet.raise_failures()
        figures["message_checks"] += check(f"round {number + 1} of {rounds}")["messages"]
        figures["rounds"] += 1
    return figures


def crash_run(
    folder: Path,
    rng: random.Random,
    rounds: int,
    seconds: float,
    every: tuple[float, float],
    db: str | None = None,
) -> Counter[str]:
    """Producers, consumers and workers on a standard and a FIFO queue, SIGKILLed at random
    (with message history on: its events must match what committed)."""
    db = db or str(folder / "crash.db")
    create_queues(db, history=True)
    with Fleet(folder / "journals", rng) as fleet:
        for name, groups in ((STANDARD, None), (FIFO, GROUPS)):
            fleet.add(
                f"producer-{name}",
                role="producer",
                db=db,
                queues=[{"name": name, "groups": groups}],
                delay_share=0.1,
                batch_share=0.5,
                pause=(0.0, 0.01),
            )
            fleet.add(f"consumer-{name}", role="consumer", db=db, queue=name)
            fleet.add(f"worker-{name}", role="worker", db=db, queue=name, concurrency=2)
        queues = [STANDARD, FIFO]

        def check(where: str) -> Counter[str]:
            return check_file(db, fleet.folder, queues=queues, where=f"crash run, {where}")

        figures = _rounds(fleet, rounds, seconds, every, check)
        _drain(fleet, db, queues)
        return _final(
            figures,
            check_file(db, fleet.folder, queues=queues, drained=True, where="crash run, after the drain"),
            fleet,
        )


def _final(figures: Counter[str], last: Counter[str], fleet: Fleet) -> Counter[str]:
    """The figures of a run: its rounds, the last check (distinct messages, operations), its kills."""
    figures.update(last)
    figures["message_checks"] += last["messages"]
    figures["kills"] += fleet.kills
    return figures


def concurrency_run(
    folder: Path, rng: random.Random, seconds: float, processes: int = 4, db: str | None = None
) -> Counter[str]:
    """``processes`` processes each sending and receiving on both queues, no kills: counters exact
    (and message history, on, exact too)."""
    db = db or str(folder / "busy.db")
    create_queues(db, history=True)
    with Fleet(folder / "journals", rng) as fleet:
        until = time.time() + seconds
        queues = [{"name": STANDARD, "groups": None}, {"name": FIFO, "groups": GROUPS}]
        for number in range(processes):
            # Every message is deleted or released (never left to time out), so no delete comes late.
            # The first process runs three producers and the consumers on one broker: their
            # writes are group-committed together (the others each have a broker per thread).
            shared = {"shared": True, "producers": 3} if number == 0 else {}
            fleet.add(
                f"mixed-{number}",
                role="mixed",
                **shared,
                db=db,
                queues=queues,
                until=until,
                vt=30,
                pause=(0.0, 0.005),
                delete_share=0.9,
                release_share=0.1,
                wait=0,
            )
        fleet.wait_all(timeout=seconds + 120)
        fleet.raise_failures()
        _drain(fleet, db, [STANDARD, FIFO], vt=30)
        last = check_file(db, fleet.folder, queues=[STANDARD, FIFO], drained=True, where="concurrency run")
        return _final(Counter(processes=processes), last, fleet)


def dead_letter_run(
    folder: Path,
    rng: random.Random,
    rounds: int,
    seconds: float,
    every: tuple[float, float],
    db: str | None = None,
) -> Counter[str]:
    """Consumers that never delete, killed at random, on queues that dead-letter after 1-2 receives."""
    db = db or str(folder / "dead.db")
    dead_letters = {"dl": "dl-dlq", "dl.fifo": "dl-dlq.fifo"}
    with durableq.open(db) as broker:
        for source, target in dead_letters.items():
            fifo = source.endswith(".fifo")
            fifo_only: dict[str, Any] = {"content_based_deduplication": True} if fifo else {}
            broker.create_queue(target, fifo=fifo)
            broker.create_queue(
                source,
                fifo=fifo,
                visibility_timeout=1,
                redrive_policy=RedrivePolicy(target, rng.choice([1, 2])),
                **fifo_only,
            )
    with Fleet(folder / "journals", rng) as fleet:
        fleet.add(
            "producer",
            role="producer",
            db=db,
            pause=(0.0, 0.05),
            vt=1,
            queues=[{"name": "dl", "groups": None}, {"name": "dl.fifo", "groups": GROUPS}],
        )
        for source in dead_letters:
            for number in range(2):
                fleet.add(
                    f"consumer-{source}-{number}",
                    role="consumer",
                    db=db,
                    queue=source,
                    vt=1,
                    delete_share=0.0,
                    release_share=0.3,
                )
        queues = list(dead_letters)

        # The kills start once the producer has committed a message: on a loaded machine a process
        # killed while it starts does nothing, and a run that checks no message proves nothing.
        def produced() -> bool:
            fleet.raise_failures()  # a role that died says why, rather than "timed out"
            return bool(store.rows(db))

        until(produced, "the producer commits a message", timeout=60)

        def check(where: str) -> Counter[str]:
            return check_file(
                db, fleet.folder, queues=queues, dead_letters=dead_letters, where=f"dead-letter run, {where}"
            )

        figures = _rounds(fleet, rounds, seconds, every, check)
        # Receive until every message has moved: the sources empty, each message once,
        # in its dead-letter queue.
        _drain(fleet, db, queues, vt=1, delete_share=0.0, release_share=1.0)
        last = check("after the drain")
        for row in store.rows(db):
            assert (
                row.queue in dead_letters.values()
                and dead_letters.get(row.dead_letter_source or "") == row.queue
            ), (
                f"after the drain message {row.message_id} is in {row.queue!r} "
                f"(from {row.dead_letter_source!r})"
            )
        return _final(figures, last, fleet)
