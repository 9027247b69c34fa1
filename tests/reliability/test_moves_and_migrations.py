"""Long-running operations killed half-way: a message move task, a migration up and down."""

from __future__ import annotations

import random
from pathlib import Path

from .migration import migration_run
from .move_task import move_task_run


def test_a_killed_message_move_task_conserves_messages_and_is_reported_failed(
    tmp_path: Path, rng: random.Random
) -> None:
    figures = move_task_run(tmp_path, rng, kills=3)
    assert figures["kills"] == 3


def test_migrations_killed_half_way_leave_a_file_that_opens_with_every_message(
    tmp_path: Path, rng: random.Random
) -> None:
    figures = migration_run(tmp_path, rng, kills=8, messages=30_000)
    assert figures["kills"] == 8
