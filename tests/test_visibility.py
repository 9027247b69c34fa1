"""Change visibility: extend, shorten, release; the 12-hour cap; stale handles."""

from __future__ import annotations

import pytest

import durableq
from tests.conftest import FakeClock


def test_extend_keeps_the_message_hidden_longer(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("slow job")
    [message] = queue.receive()
    clock.advance(20)
    queue.change_visibility(message.receipt_handle, 60)  # counted from now: hidden until +80 s
    clock.advance(59.999)
    assert queue.receive() == []
    clock.advance(0.001)
    assert len(queue.receive()) == 1


def test_shorten_and_release(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("a")
    queue.send("b")
    first, second = queue.receive(2)
    queue.change_visibility(first.receipt_handle, 5)
    queue.change_visibility(second.receipt_handle, 0)
    assert [m.body for m in queue.receive(10)] == [second.body]
    clock.advance(5)
    assert [m.body for m in queue.receive(10)] == [first.body]


def test_the_change_applies_to_this_receipt_only(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("x")
    [message] = queue.receive()
    queue.change_visibility(message.receipt_handle, 0)
    queue.receive()  # next receive uses the queue's 30 s again
    clock.advance(29)
    assert queue.receive() == []
    clock.advance(1)
    assert len(queue.receive()) == 1


def test_an_old_handle_raises_message_not_inflight(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("x")
    [old] = queue.receive()
    clock.advance(30)
    [new] = queue.receive()
    with pytest.raises(durableq.MessageNotInflight, match="not the message's latest"):
        queue.change_visibility(old.receipt_handle, 10)
    queue.change_visibility(new.receipt_handle, 10)


def test_a_deleted_message_raises_invalid_parameter_value(queue: durableq.Queue) -> None:
    queue.send("x")
    [message] = queue.receive()
    queue.delete(message.receipt_handle)
    with pytest.raises(durableq.InvalidParameterValue, match="no longer exists"):
        queue.change_visibility(message.receipt_handle, 10)


def test_an_expired_latest_handle_may_hide_the_message_again(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("x")
    [message] = queue.receive()
    clock.advance(31)  # visible again, and nobody received it since
    queue.change_visibility(message.receipt_handle, 100)
    assert queue.receive() == []
    clock.advance(100)
    assert len(queue.receive()) == 1


def test_visibility_ends_at_most_12_hours_after_the_receive(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("x")
    [message] = queue.receive(visibility_timeout=43_200)
    clock.advance(3_600)
    with pytest.raises(durableq.InvalidParameterValue, match=r"12 h.*at most 39600 s is left"):
        queue.change_visibility(message.receipt_handle, 43_200)
    queue.change_visibility(message.receipt_handle, 39_600)  # ends exactly 12 h after the receive
    clock.advance(39_600)
    [again] = queue.receive(visibility_timeout=43_200)  # a new receive starts a new 12 h
    clock.advance(40_000)
    queue.change_visibility(again.receipt_handle, 3_200)


@pytest.mark.parametrize("bad", [-1, 43_201, 2.5, "10", None])
def test_timeout_limits(queue: durableq.Queue, bad: object) -> None:
    queue.send("x")
    [message] = queue.receive()
    with pytest.raises(durableq.InvalidParameterValue, match="visibility timeout must be"):
        queue.change_visibility(message.receipt_handle, bad)  # type: ignore[arg-type]


def test_a_malformed_handle_is_invalid(queue: durableq.Queue) -> None:
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        queue.change_visibility("not-a-handle", 10)


def test_an_expired_in_flight_message_is_gone_for_change_visibility(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    queue = broker.create_queue("short", retention_period=60)
    queue.send("x")
    [message] = queue.receive(visibility_timeout=300)
    clock.advance(61)  # past retention while in flight; no receive has swept it yet
    with pytest.raises(durableq.InvalidParameterValue, match="no longer exists"):
        queue.change_visibility(message.receipt_handle, 10)
    with pytest.raises(durableq.InvalidParameterValue, match="no longer exists"):
        queue.extend_visibility(message.receipt_handle, 10)


def test_extend_visibility_stops_at_the_12_hour_cap(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("long job")
    [message] = queue.receive(visibility_timeout=60)
    assert queue.extend_visibility(message.receipt_handle, 600) == 600
    clock.advance(43_200 - 100)
    assert queue.extend_visibility(message.receipt_handle, 600) == 100  # the cap: 12 h after the receive
    clock.advance(100)
    assert queue.extend_visibility(message.receipt_handle, 600) == 0
    clock.advance(1)
    [again] = queue.receive()
    assert again.message_id == message.message_id
