"""Transactions under SIGKILL (issue 29): the outbox's rows and messages, and the transactional
worker's effects and deletes, commit together or not at all.  Longer: ``python -m
tests.reliability.outbox --minutes N``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from .outbox import outbox_run, worker_run


@pytest.mark.slow
def test_every_committed_row_has_exactly_one_message_when_producers_are_killed(
    tmp_path: Path, target: str, rng: random.Random
) -> None:
    # A producer per form (own connection, ORM Session, Core Connection, raw driver); 8 times one of
    # them is killed 0.05-1 s after it got to work, and restarted; then a few more rows each, undisturbed.
    figures = outbox_run(tmp_path, rng, kills=8, every=(0.05, 1.0), db=target)
    print(f"outbox kill test: {json.dumps(figures)}")  # shown with -s: the figures of the closing note
    assert figures["kills"] >= 8 and figures["rows"] >= 20, figures


@pytest.mark.slow
def test_every_effect_commits_with_its_delete_when_transactional_workers_are_killed(
    tmp_path: Path, target: str, rng: random.Random
) -> None:
    # Two worker processes (2 handlers each) on a queue of 800 keys; 8 times one of them is killed
    # 0.05-1 s after it got to work, and restarted; checked after the kills and after a drain without them.
    figures = worker_run(tmp_path, rng, kills=8, every=(0.05, 1.0), db=target, messages=800)
    print(f"transactional worker kill test: {json.dumps(figures)}")
    assert figures["kills"] >= 8 and figures["effects_after_kills"] > 0, figures
