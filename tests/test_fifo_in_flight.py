"""A FIFO queue's in-flight limit stays exact while a broker skips counting (``ops/in_flight.py``), and
its row stays the live one while a broker skips the catalog's check (``ops/queue_rows.Catalog.get``).

A broker's connection remembers an upper bound of the messages in flight between its receives; these
tests change what is in flight behind that bound's back, in the two ways that can: another process
commits, and the broker itself puts a message back in flight by changing its visibility.  The limit
is lowered (the forked process inherits it) so that a few dozen messages reach it; 40 messages in 40
groups make the file's span of row ids too wide to prove room, so the broker counts and remembers.
"""

from __future__ import annotations

import multiprocessing

import pytest

import durableq
from durableq import SendEntry, limits
from tests.conftest import FakeClock

CAP = 25
HOUR = 3_600


def _fill(queue: durableq.Queue) -> None:
    for start in range(0, 40, 10):
        result = queue.send_batch(
            [SendEntry(str(j), f"m{start + j}", group_id=f"g{start + j}") for j in range(10)]
        )
        assert not result.failed


def _receive_in_another_process(target: str, count: int, done: multiprocessing.Queue) -> None:
    with durableq.open(target, durability="normal") as broker:
        queue = broker.get_queue("limit.fifo")
        received = 0
        while received < count:
            received += len(queue.receive(min(10, count - received), visibility_timeout=HOUR))
        done.put(received)


def test_messages_another_process_puts_in_flight_count_against_the_limit(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_IN_FLIGHT_FIFO", CAP)
    with durableq.open(target, durability="normal") as broker:
        queue = broker.create_queue("limit.fifo", fifo=True, content_based_deduplication=True)
        _fill(queue)
        assert len(queue.receive(10, visibility_timeout=HOUR)) == 10  # counted: 0 in flight before
        done: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
        other = multiprocessing.get_context("fork").Process(
            target=_receive_in_another_process, args=(target, 10, done)
        )
        other.start()
        assert done.get(timeout=120) == 10
        other.join(30)
        # 20 in flight: this broker's bound (its count, 0, plus its 10) would leave room for 10.
        assert len(queue.receive(10, visibility_timeout=HOUR)) == CAP - 20
        assert queue.stats().approximate_number_of_messages_not_visible == CAP
        with pytest.raises(durableq.OverLimit, match=str(CAP)):
            queue.receive()


def test_a_message_put_back_in_flight_by_a_visibility_change_counts_against_the_limit(
    broker: durableq.Broker, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    monkeypatch.setattr(limits, "MAX_IN_FLIGHT_FIFO", CAP)
    queue = broker.create_queue("limit.fifo", fifo=True, content_based_deduplication=True)
    _fill(queue)
    first = queue.receive(10, visibility_timeout=HOUR) + queue.receive(10, visibility_timeout=HOUR)
    assert len(first) == 20
    clock.advance(1)  # their groups come back after the 20 others: the next receive takes those
    for message in first:  # visible again, their handles still the latest
        queue.change_visibility(message.receipt_handle, 0)
    assert len(queue.receive(10, visibility_timeout=HOUR)) == 10  # counted: 0 in flight before
    for message in first[:10]:  # back in flight by this broker's own connection: 20 in flight
        queue.change_visibility(message.receipt_handle, HOUR)
    assert queue.stats().approximate_number_of_messages_not_visible == 20
    # The count (0) plus this broker's 10 would leave room for 10.
    assert len(queue.receive(10, visibility_timeout=HOUR)) == CAP - 20
    with pytest.raises(durableq.OverLimit, match=str(CAP)):
        queue.receive()


def _receive_two(queue: durableq.Queue) -> None:
    """Two receives: the second checks the cached row at the connection's mark (SQLite)."""
    queue.send("a", group_id="a")
    queue.send("b", group_id="b")
    assert [m.body for m in queue.receive() + queue.receive()] == ["a", "b"]


def test_a_fifo_queue_another_broker_recreated_is_the_one_received_from(
    target: str, clock: FakeClock
) -> None:
    with durableq.open(target, clock=clock, durability="normal") as mine:
        queue = mine.create_queue("again.fifo", fifo=True, content_based_deduplication=True)
        _receive_two(queue)
        with durableq.open(target, clock=clock, durability="normal") as other:
            other.delete_queue("again.fifo")
            other.create_queue("again.fifo", fifo=True, content_based_deduplication=True).send(
                "new", group_id="a"
            )
        assert [m.body for m in queue.receive()] == ["new"]


def test_a_fifo_queues_new_visibility_timeout_applies_at_the_next_receive(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    queue = broker.create_queue("timeout.fifo", fifo=True, content_based_deduplication=True)
    _receive_two(queue)
    queue.set_attributes(visibility_timeout=100)
    queue.send("c", group_id="c")
    assert [m.body for m in queue.receive()] == ["c"]
    clock.advance(50)  # a and b (30 s) are back; c (100 s) is not
    assert [m.body for m in queue.receive(10)] == ["a", "b"]
