"""Crash recovery: producers, consumers and workers SIGKILLed at random, on standard and FIFO queues."""

from __future__ import annotations

import random
from pathlib import Path

from .scenarios import crash_run, dead_letter_run


def test_nothing_is_lost_or_held_twice_when_processes_are_killed_at_random(
    tmp_path: Path, target: str, rng: random.Random
) -> None:
    # Six processes (a producer, a consumer and a durableq.Worker per queue), one killed every
    # 0.2-0.6 s and restarted, for three rounds; every invariant checked after each round and
    # after a last drain without kills.  On each engine ([sqlite]: a file in tmp_path;
    # [postgresql]: a fresh database, a copy of the migrated template, dropped afterwards).
    figures = crash_run(tmp_path, rng, rounds=3, seconds=7, every=(0.2, 0.6), db=target)
    assert figures["kills"] >= 24 and figures["messages"] > 0, figures
    assert figures["history_checked"] > 0, figures  # the queues keep history: their events were checked


def test_dead_letter_moves_survive_kills_with_every_message_in_exactly_one_queue(
    tmp_path: Path, rng: random.Random
) -> None:
    figures = dead_letter_run(tmp_path, rng, rounds=2, seconds=5, every=(0.2, 0.6))
    assert figures["kills"] >= 10 and figures["messages"] > 0, figures
