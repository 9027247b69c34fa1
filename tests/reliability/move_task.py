"""A message move task whose process is SIGKILLed mid-way, again and again.

After each kill every message is exactly once in the source or the
destination, and the task is reported FAILED once its heartbeat is stale
(or COMPLETED if it finished first).  A last task, never killed, moves the rest.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import durableq
from durableq import RedrivePolicy, SendEntry, limits

from . import store
from .fleet import launch
from .journal import read_journal, wait_for_line

SOURCE, DEAD = "mv", "mv-dlq"
#: The staleness limit this process applies when it looks at tasks (the runner's process never reads it).
STALE_AFTER = 1.0


@contextmanager
def stale_after(seconds: float) -> Iterator[None]:
    """Make this process mark tasks FAILED after ``seconds`` without a heartbeat."""
    saved = limits.MOVE_TASK_STALE_AFTER
    limits.MOVE_TASK_STALE_AFTER = seconds
    try:
        yield
    finally:
        limits.MOVE_TASK_STALE_AFTER = saved


def fill_dead_letters(db: Path, count: int) -> dict[str, str]:
    """``count`` messages in the dead-letter queue, each received once in the source first."""
    with durableq.open(db, durability="normal") as broker:
        broker.create_queue(DEAD)
        source = broker.create_queue(SOURCE, redrive_policy=RedrivePolicy(DEAD, 1))
        for start in range(0, count, 10):
            source.send_batch([SendEntry(str(i), f"dead.{start + i}") for i in range(min(10, count - start))])
        # A receive with visibility 0 counts one receive; the next receive moves the message.
        while source.receive(10, visibility_timeout=0):
            pass
    return {row.message_id: row.body for row in store.rows(db) if row.queue == DEAD}


def check_conserved(db: Path, expected: dict[str, str], queues: set[str]) -> None:
    """Every expected message exactly once, in one of ``queues``, with its body; nothing else."""
    verdict = store.integrity(db)
    assert verdict == "ok", f"integrity_check: {verdict}"
    found = Counter(row.message_id for row in store.rows(db))
    problems = [f"{m} stored {n} times" for m, n in found.items() if n != 1]
    problems += [f"{m} lost" for m in expected if m not in found]
    problems += [f"{m} appeared from nowhere" for m in found if m not in expected]
    problems += [
        f"{row.message_id} is in {row.queue!r} with body {row.body!r}"
        for row in store.rows(db)
        if row.queue not in queues or expected.get(row.message_id, row.body) != row.body
    ]
    assert not problems, f"{len(problems)} messages not conserved: {problems[:20]}"


def move_task_run(
    folder: Path, rng: random.Random, kills: int, messages: int = 2000, rate: int = 300
) -> Counter[str]:
    db = folder / "moves.db"
    expected = fill_dead_letters(db, messages)
    assert len(expected) == messages
    figures: Counter[str] = Counter()
    for number in range(kills):
        journal = folder / f"mover.{number:04d}.jsonl"
        config = {
            "role": "mover",
            "db": str(db),
            "journal": str(journal),
            "seed": 0,
            "source": DEAD,
            "rate": rate,
        }
        process = launch(config, journal.with_suffix(".err"))
        wait_for_line(journal, "move-started")
        time.sleep(rng.uniform(0, 1.5))
        process.kill()
        process.wait()
        figures["kills"] += 1
        check_conserved(db, expected, {SOURCE, DEAD})
        time.sleep(STALE_AFTER + 0.2)  # real time: staleness is about a dead process's heartbeat
        with stale_after(STALE_AFTER), durableq.open(db) as broker:
            (task,) = [t for t in broker.list_message_moves(DEAD) if t.task_handle == _task_of(journal)]
        assert task.status in ("FAILED", "COMPLETED"), f"a killed move task is reported {task.status}: {task}"
        figures["message_checks"] += messages
    with durableq.open(db) as broker:
        task = broker.start_message_move(DEAD)
        broker.wait_for_message_move(task.task_handle, timeout=300)
        (ended,) = [t for t in broker.list_message_moves(DEAD) if t.task_handle == task.task_handle]
    assert ended.status == "COMPLETED", f"the last move task ended {ended.status}: {ended}"
    check_conserved(db, expected, {SOURCE})
    figures["messages"] += messages
    figures["message_checks"] += messages
    return figures


def _task_of(journal: Path) -> str:
    return next(e["task"] for e in read_journal(journal) if e.kind == "move-started")
