"""Statements that name their rows by id find them by primary key, whatever else their WHERE says:
SQLite (with no statistics) preferred the queue's index range for ``queue_id = ?`` and walked every
message of the queue for each dead-letter move, move-task batch and FIFO attempt replay."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import durableq
from durableq.engines.dialect import SQLITE
from durableq.ops import fifo, history, relocation, visibility

PARAMS = {
    "ids": "[1, 2]",
    "rows": "[1, 2]",
    "keys": '["1.0123456789abcdef", "2.0123456789abcdef"]',
    "source_id": 1,
    "target_id": 2,
    "queue_id": 1,
    "expired_before": 0,
    "now": 0,
    "source_name": "jobs",
    "event": "moved_out",
    "other": None,
    "handles": '[[1, "a"]]',
}
STATEMENTS = {
    "movable rows": relocation._MOVABLE[SQLITE],
    "dead-letter move": relocation._STATEMENTS[SQLITE][relocation.Kind.DEAD_LETTER][0],
    "move-task move": relocation._STATEMENTS[SQLITE][relocation.Kind.MOVE_TASK][0],
    "history of the rows leaving": history._INSERT_FROM_MESSAGES.format(
        where=relocation._MOVABLE_WHERE[SQLITE]
    ),
    "history of the rows arriving": history._INSERT_FROM_MESSAGES.format(
        where=relocation._ARRIVED_WHERE[SQLITE]
    ),
    "delete_batch of a history queue": visibility._DELETE_HANDLES_RETURNING[SQLITE],
    "FIFO attempt replay": fifo._ATTEMPT_ROWS[SQLITE],
}


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    with durableq.open(tmp_path / "q.db", durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        broker.create_queue("dlq")
        for i in range(50):
            jobs.send(str(i))
    return sqlite3.connect(tmp_path / "q.db")


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_rows_named_by_id_are_found_by_primary_key(conn: sqlite3.Connection, name: str) -> None:
    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {STATEMENTS[name]}", PARAMS)]
    messages = [step for step in plan if " durableq_messages " in f"{step} "]
    assert messages and all("INTEGER PRIMARY KEY" in step for step in messages), plan


def test_a_fifo_receive_of_one_walks_the_groups_index_and_one_group(conn: sqlite3.Connection) -> None:
    # The first servable group by its index, its head by the group index: no scan, no sort.
    statement = fifo._CLAIM_FIRST_HEAD[SQLITE]
    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}", {**PARAMS, "visible_at": 0})]
    assert not [step for step in plan if step.startswith("SCAN") or "TEMP B-TREE" in step], plan
    assert any("durableq_ix_fifo_groups_available" in step for step in plan), plan
    assert any("durableq_ix_messages_group" in step for step in plan), plan
