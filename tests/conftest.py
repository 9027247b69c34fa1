"""Shared fixtures: real SQLite files in a temporary folder and a fake clock for time rules."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType

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


def threads_inside(code: CodeType) -> list[int]:
    """The threads of this process (their idents) now running ``code``, at any depth of their stack."""
    inside = []
    for ident, frame in sys._current_frames().items():
        while frame is not None:
            if frame.f_code is code:
                inside.append(ident)
                break
            frame = frame.f_back  # type: ignore[assignment]
    return inside


def until(condition: Callable[[], object], what: str, timeout: float = 30) -> None:
    """Poll until ``condition()`` is true; fail loudly (saying ``what``) at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def until_long_polls_wait(count: int = 1) -> None:
    """Return once ``count`` threads of this process are inside a long poll's wait: a send after
    this call is one the poll waits for, not one it finds when it starts."""
    from durableq.ops.longpoll import ThreadWaiter

    until(lambda: len(threads_inside(ThreadWaiter.wait.__code__)) >= count, f"{count} long polls wait")


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
