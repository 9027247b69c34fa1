"""Shared fixtures: real SQLite files in a temporary folder and a fake clock for time rules."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq

START = 1_800_000_000.0  # 2027-01-15, well past 2038 in milliseconds' 32-bit range


class FakeClock:
    """A broker clock that moves only when a test says so (thread-safe)."""

    def __init__(self, start: float = START) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


@pytest.fixture
def broker(db_path: Path, clock: FakeClock) -> Iterator[durableq.Broker]:
    with durableq.open(db_path, clock=clock, durability="normal") as opened:
        yield opened


@pytest.fixture
def queue(broker: durableq.Broker) -> durableq.Queue:
    return broker.create_queue("jobs")


@pytest.fixture
def fifo(broker: durableq.Broker) -> durableq.Queue:
    return broker.create_queue("jobs.fifo", fifo=True)
