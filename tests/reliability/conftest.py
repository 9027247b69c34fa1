"""Fixtures of the reliability suite: a random generator whose seed a failure shows."""

from __future__ import annotations

import os
import random

import pytest


@pytest.fixture
def rng() -> random.Random:
    """Random kill times and workloads; set DURABLEQ_SEED to replay a failing run's choices.

    Only the harness's choices replay: the operating system schedules the
    processes differently every time, which is the point of running them.
    """
    seed = int(os.environ.get("DURABLEQ_SEED") or random.randrange(2**32))
    print(f"reliability seed: DURABLEQ_SEED={seed}")  # shown by pytest when the test fails
    return random.Random(seed)
