"""Long polling: a waiting receive wakes when a message arrives, from any thread or process."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest

import durableq
from tests.conftest import FakeClock


def _send_later(path: str, queue: str, body: str, delay: float) -> None:
    time.sleep(delay)
    with durableq.open(path) as broker:
        broker.get_queue(queue).send(body)


def test_a_send_from_another_process_wakes_a_long_poll(db_path: Path) -> None:
    with durableq.open(db_path) as broker:
        queue = broker.create_queue("jobs")
        sender = multiprocessing.get_context("spawn").Process(
            target=_send_later, args=(str(db_path), "jobs", "from afar", 1.0)
        )
        sender.start()
        started = time.monotonic()
        messages = queue.receive(wait_time=20)
        waited = time.monotonic() - started
        sender.join(30)
    assert [m.body for m in messages] == ["from afar"]
    assert waited < 15  # returned on arrival, not at the 20 s deadline


def test_a_send_from_another_thread_wakes_a_long_poll(queue: durableq.Queue) -> None:
    timer = threading.Timer(0.3, queue.send, args=("from a thread",))
    timer.start()
    started = time.monotonic()
    messages = queue.receive(wait_time=20)
    assert [m.body for m in messages] == ["from a thread"]
    assert time.monotonic() - started < 15


def test_an_empty_long_poll_returns_at_its_deadline(queue: durableq.Queue) -> None:
    started = time.monotonic()
    assert queue.receive(wait_time=1) == []
    assert time.monotonic() - started >= 0.95
    assert sum(m.empty_receives for m in queue.metrics()) == 1


def test_the_queue_wait_time_is_the_default(broker: durableq.Broker) -> None:
    queue = broker.create_queue("waits", receive_wait_time=1)
    started = time.monotonic()
    assert queue.receive() == []
    assert time.monotonic() - started >= 0.95
    started = time.monotonic()
    assert queue.receive(wait_time=0) == []
    assert time.monotonic() - started < 0.9


def test_a_long_poll_wakes_when_a_delayed_message_becomes_visible(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    queue.send("delayed", delay_seconds=60)
    threading.Timer(0.3, clock.advance, args=(60,)).start()
    assert [m.body for m in queue.receive(wait_time=20)] == ["delayed"]


def test_a_long_poll_wakes_when_an_in_flight_message_comes_back(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    queue.send("retry me")
    queue.receive(visibility_timeout=30)
    threading.Timer(0.3, clock.advance, args=(30,)).start()
    [message] = queue.receive(wait_time=20)
    assert message.receive_count == 2


@pytest.mark.parametrize("bad", [-1, 21, 1.5])
def test_wait_time_limits(queue: durableq.Queue, bad: object) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="wait_time must be"):
        queue.receive(wait_time=bad)  # type: ignore[arg-type]


def test_two_long_polls_never_get_the_same_message(queue: durableq.Queue) -> None:
    results: list[list[durableq.Message]] = []

    def wait() -> None:
        results.append(queue.receive(wait_time=3))

    waiters = [threading.Thread(target=wait) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.3)
    queue.send("only one")
    for waiter in waiters:
        waiter.join()
    assert sorted(len(r) for r in results) == [0, 1]
