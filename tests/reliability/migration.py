"""Migrations killed half-way: ``durableq.open`` upgrading a file from revision 0001,
and a downgrade of a big file, each SIGKILLed at a random moment.

Afterwards the file must pass ``PRAGMA integrity_check``, have the schema its
revision says, keep every message, and open (migrating to head).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import durableq
from durableq import SendEntry
from durableq.engines import migrate
from durableq.engines.sqlite.database import Database

from . import store
from .fleet import launch
from .journal import read_journal, wait_for_line
from .move_task import check_conserved

OLD = "0001"
#: A column each revision adds, to tell which schema a file really has.
_ADDED_BY_HEAD = {"messages": "trace_header", "queues": "policy"}


def head_revision(db: Path) -> str:
    """The newest revision this durableq knows (what ``durableq.open`` migrates to)."""
    return next(
        r.revision for r in migrate.history(Database(db, durability="normal", busy_timeout=10)) if r.is_head
    )


def downgrade(db: Path) -> None:
    database = Database(db, durability="normal", busy_timeout=10)
    try:
        migrate.downgrade(database, OLD)
    finally:
        database.close()


def fill(db: Path, count: int) -> dict[str, str]:
    with durableq.open(db, durability="normal") as broker:
        queue = broker.create_queue("keep")
        for start in range(0, count, 10):
            queue.send_batch([SendEntry(str(i), f"keep.{start + i}") for i in range(min(10, count - start))])
        broker.create_queue("keep.fifo", fifo=True).send("ordered", group_id="g", deduplication_id="d")
    return {row.message_id: row.body for row in store.rows(db)}


def check_schema_matches_revision(db: Path) -> str:
    revision, head = store.revision(db), head_revision(db)
    assert revision in (OLD, head), f"the file is at revision {revision!r}"
    for table, column in _ADDED_BY_HEAD.items():
        present = column in {*store.columns(db, table), *store.columns(db, f"durableq_{table}")}
        assert present == (revision == head), (
            f"the file says revision {revision} but {table}.{column} is {'there' if present else 'missing'}"
        )
    return revision


def _timed(folder: Path, db: Path, role: str) -> float:
    """How long a clean migration of a copy takes, from the role's 'migrating' line to 'migrated'."""
    copy = folder / f"calibrate-{role}.db"
    store.copy_database(db, copy)
    journal = folder / f"calibrate-{role}.jsonl"
    launch(
        {"role": role, "db": str(copy), "journal": str(journal), "seed": 0, "target": OLD},
        journal.with_suffix(".err"),
    ).wait()
    times = {e.kind: e["t"] for e in read_journal(journal)}
    return times["migrated"] - times["migrating"]


def _kill_during(folder: Path, db: Path, role: str, window: float, rng: random.Random, number: int) -> None:
    journal = folder / f"{role}.{number:04d}.jsonl"
    process = launch(
        {"role": role, "db": str(db), "journal": str(journal), "seed": 0, "target": OLD},
        journal.with_suffix(".err"),
    )
    wait_for_line(journal, "migrating")
    time.sleep(rng.uniform(0, window))
    process.kill()
    process.wait()


def migration_run(folder: Path, rng: random.Random, kills: int, messages: int = 20_000) -> Counter[str]:
    db = folder / "migrate.db"
    expected = fill(db, messages)
    queues = {"keep", "keep.fifo"}
    downgrade(db)
    up, down = (
        _timed(folder, db, "upgrader"),
        _timed(folder, db.with_name("calibrate-upgrader.db"), "downgrader"),
    )
    figures: Counter[str] = Counter()
    for number in range(kills):
        # Half the kills hit an upgrade from 0001 (durableq.open), half a downgrade from head.
        role, window = ("upgrader", up) if number % 2 == 0 else ("downgrader", down)
        at = check_schema_matches_revision(db)
        if role == "upgrader" and at != OLD:
            downgrade(db)
        elif role == "downgrader" and at == OLD:
            durableq.open(db).close()
        _kill_during(folder, db, role, window * 1.2, rng, number)
        figures["kills"] += 1
        check_schema_matches_revision(db)
        check_conserved(db, expected, queues)
        figures["message_checks"] += len(expected)
    with durableq.open(db) as broker:  # opens, migrating to head, and works
        assert len(broker.get_queue("keep").receive(10)) == 10
    assert check_schema_matches_revision(db) == head_revision(db)
    check_conserved(db, expected, queues)
    figures["messages"] += len(expected)
    figures["message_checks"] += len(expected)
    return figures
