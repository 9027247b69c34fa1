"""Schedules under SIGKILL (issue 33): three ``durableq scheduler`` processes on one database, a
one-second rate, one of them SIGKILLed midway and restarted; every scheduled time arrives exactly
once.  Longer: ``python -m tests.reliability.schedules --minutes N``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from .schedules import run

#: Seconds of ticks per engine in the default run (the long run is the module's).
SECONDS = 12


@pytest.mark.slow
def test_each_scheduled_time_arrives_once_with_three_schedulers_and_a_kill(
    tmp_path: Path, target: str, rng: random.Random
) -> None:
    figures = run(target, tmp_path, rng, SECONDS, schedulers=3, kills=1)
    print(f"schedule kill test: {json.dumps(figures)}")
    assert figures["ticks"] >= SECONDS // 2, figures  # the schedulers did send, through the kill
