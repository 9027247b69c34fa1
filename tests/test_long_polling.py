"""Long polling: a waiting receive wakes when a message arrives, from any thread or process."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

import durableq
from tests.conftest import FakeClock, until_long_polls_wait


def _send(path: str, queue: str, body: str) -> None:
    with durableq.open(path) as broker:
        broker.get_queue(queue).send(body)


def _poll(queue: durableq.Queue, wait_time: int = 20) -> tuple[threading.Thread, list[durableq.Message]]:
    """A long poll in a thread of its own; the list receives what it returns."""
    received: list[durableq.Message] = []
    thread = threading.Thread(target=lambda: received.extend(queue.receive(wait_time=wait_time)))
    thread.start()
    return thread, received


def _returned_before_its_deadline(thread: threading.Thread, started: float) -> bool:
    thread.join(30)
    return not thread.is_alive() and time.monotonic() - started < 15  # a 20 s poll, woken well before


def test_a_send_from_another_process_wakes_a_long_poll(target: str) -> None:
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs")
        started = time.monotonic()
        poll, received = _poll(queue)
        until_long_polls_wait()
        sender = multiprocessing.get_context("spawn").Process(
            target=_send, args=(target, "jobs", "from afar")
        )
        sender.start()
        sender.join(30)
        assert sender.exitcode == 0
        assert _returned_before_its_deadline(poll, started)
    assert [m.body for m in received] == ["from afar"]


def test_a_send_from_another_thread_wakes_a_long_poll(queue: durableq.Queue) -> None:
    started = time.monotonic()
    poll, received = _poll(queue)
    until_long_polls_wait()
    queue.send("from a thread")
    assert _returned_before_its_deadline(poll, started)
    assert [m.body for m in received] == ["from a thread"]


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
    started = time.monotonic()
    poll, received = _poll(queue)
    until_long_polls_wait()  # it found nothing visible, and waits
    clock.advance(60)
    assert _returned_before_its_deadline(poll, started)
    assert [m.body for m in received] == ["delayed"]


def test_a_long_poll_wakes_when_an_in_flight_message_comes_back(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    queue.send("retry me")
    queue.receive(visibility_timeout=30)
    started = time.monotonic()
    poll, received = _poll(queue)
    until_long_polls_wait()
    clock.advance(30)
    assert _returned_before_its_deadline(poll, started)
    assert [m.receive_count for m in received] == [2]


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
    until_long_polls_wait(2)  # both wait when the one message arrives
    queue.send("only one")
    for waiter in waiters:
        waiter.join()
    assert sorted(len(r) for r in results) == [0, 1]


@pytest.mark.parametrize("fifo", [False, True])
def test_deleting_the_queue_ends_its_long_polls_with_queue_does_not_exist(
    broker: durableq.Broker, fifo: bool
) -> None:
    queue = broker.create_queue("gone.fifo" if fifo else "gone", fifo=fifo)
    failures: list[BaseException] = []

    def poll() -> None:
        try:
            queue.receive(wait_time=20)
        except durableq.DurableQError as exc:
            failures.append(exc)

    thread = threading.Thread(target=poll)
    thread.start()
    until_long_polls_wait()
    broker.delete_queue(queue.name)
    thread.join()
    assert [type(f) for f in failures] == [durableq.QueueDoesNotExist]  # not an empty list at 20 s
