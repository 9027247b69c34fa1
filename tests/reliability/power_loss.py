"""Power loss, modelled as a copy of the files taken at an instant.

Producers (sends and batches, no deletes) run with ``durability="full"``, one
process of them as four threads on one broker (group commit).  At
random moments every one of them is frozen with SIGSTOP, the journals are
read and the database, its ``-wal`` and ``-shm`` are copied, and they go on
(SIGCONT).  Each copy must open, pass ``PRAGMA integrity_check`` and hold
every send that had returned before the freeze, and every batch whole or not
at all.

What this models: a crash of every process and of the machine at one
instant, with what the kernel already accepted (the page cache) kept.  It
does not model writes lost because they were never fsynced; that part of
the promise rests on SQLite's ``synchronous=FULL``, which durableq sets.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import psutil

import durableq

from . import store
from .checker import (
    Problems,
    check_batches_whole,
    check_no_phantoms,
    check_nothing_lost,
    check_stats,
    stored_by_id,
)
from .fleet import Fleet
from .history import History
from .journal import read_journals
from .scenarios import FIFO, GROUPS, STANDARD, create_queues


def freeze_and_copy(fleet: Fleet, db: Path, target: Path) -> History:
    """Stop every writer, read what the journals say was sent, copy the files, let them go on."""
    processes = [psutil.Process(slot.process.pid) for slot in fleet.running() if slot.process is not None]
    for process in processes:
        os.kill(process.pid, signal.SIGSTOP)
    try:
        for process in processes:  # SIGSTOP is asynchronous: wait until each one is really stopped
            while process.is_running() and process.status() not in (
                psutil.STATUS_STOPPED,
                psutil.STATUS_ZOMBIE,
            ):
                time.sleep(0.001)
        history = History(read_journals(fleet.folder))
        target.mkdir(parents=True)
        store.copy_database(db, target / db.name)
    finally:
        for process in processes:
            os.kill(process.pid, signal.SIGCONT)
    return history


def check_copy(copy: Path, history: History) -> int:
    """The copy opens and holds what the history says was acknowledged; returns how many messages it holds."""
    problems = Problems()
    verdict = store.integrity(copy, writable=True)  # the first opener after the crash recovers the WAL
    if verdict != "ok":
        problems.add(f"INTEGRITY: {verdict}")
    stored = stored_by_id(copy)
    check_nothing_lost(history, stored, problems)
    check_no_phantoms(history, stored, {}, problems)
    check_batches_whole(history, stored, problems)
    with durableq.open(copy) as broker:
        assert set(broker.list_queues()) == {STANDARD, FIFO}
    check_stats(copy, stored, problems)
    problems.raise_if_any(f"the power-loss copy {copy}")
    return len(stored)


def power_loss_run(
    folder: Path, rng: random.Random, snapshots: int, every: tuple[float, float]
) -> Counter[str]:
    db = folder / "power.db"
    create_queues(db)
    with Fleet(folder / "journals", rng) as fleet:
        for number in range(2):
            fleet.add(
                f"producer-{number}",
                role="producer",
                db=str(db),
                pause=(0.0, 0.01),
                queues=[{"name": STANDARD, "groups": None}, {"name": FIFO, "groups": GROUPS}],
            )
        # Four producer threads on one broker: frozen while their writes share transactions.
        fleet.add(
            "threads-0",
            role="producers",
            shared=True,
            producers=4,
            db=str(db),
            pause=(0.0, 0.01),
            queues=[{"name": STANDARD, "groups": None}, {"name": FIFO, "groups": GROUPS}],
        )
        figures: Counter[str] = Counter()
        for number in range(snapshots):
            time.sleep(rng.uniform(*every))
            fleet.raise_failures()
            copy = folder / f"copy-{number:04d}"
            history = freeze_and_copy(fleet, db, copy)
            held = check_copy(copy / db.name, history)
            figures["message_checks"] += held
            figures["messages"] = max(figures["messages"], held)
            figures["snapshots"] += 1
            shutil.rmtree(copy)
        return figures
