"""Temporary queues: uniquely named, deleted after their idle timeout without use by any process's
broker (also after their owner was killed), kept alive by the broker holding them, deleted by
``with`` and when their broker closes."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

import durableq
from tests.conftest import START, FakeClock, sql_rows


def test_a_temporary_queue_is_unique_and_goes_at_the_end_of_its_block(broker: durableq.Broker) -> None:
    with (
        broker.temporary_queue("reply", idle_timeout=120) as first,
        broker.temporary_queue("reply") as second,
    ):
        assert first.name != second.name and first.name.startswith("reply-")
        assert first.idle_timeout == 120 and second.idle_timeout == 300
        assert sorted(broker.list_queues("reply-")) == sorted([first.name, second.name])
        first.send("x")
        assert [m.body for m in first.receive()] == ["x"]
    assert broker.list_queues("reply-") == []
    actions = [(e.action, e.detail.get("reason")) for e in broker.audit() if e.queue == first.name]
    assert actions == [("CreateQueue", None), ("DeleteQueue", "temporary")]


def test_fifo_and_settings(broker: durableq.Broker) -> None:
    queue = broker.temporary_queue(
        "ordered", fifo=True, content_based_deduplication=True, visibility_timeout=5
    )
    assert queue.name.endswith(".fifo") and queue.fifo
    assert queue.attributes()["visibility_timeout"] == 5
    queue.send("a", group_id="g")
    assert queue.receive()[0].group_id == "g"


def test_bad_arguments_are_refused(broker: durableq.Broker) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="idle_timeout"):
        broker.temporary_queue(idle_timeout=59)
    with pytest.raises(durableq.InvalidParameterValue, match="prefix must be at most 63"):
        broker.temporary_queue("p" * 70)
    with pytest.raises(durableq.InvalidParameterValue):
        broker.temporary_queue("bad name")
    with pytest.raises(durableq.InvalidAttributeName):
        broker.temporary_queue(nonsense=1)
    assert broker.list_queues() == []


def _other_broker(target: str, clock: FakeClock) -> durableq.Broker:
    return durableq.open(target, clock=clock, durability="normal")


def test_an_idle_queue_is_deleted_by_another_broker_and_a_used_one_is_not(
    broker: durableq.Broker, target: str, clock: FakeClock
) -> None:
    idle = broker.temporary_queue("idle", idle_timeout=600)
    used = broker.temporary_queue("used", idle_timeout=600)
    broker._rt.temporary_queues.release(idle.name)  # as if its holder were gone: no more heartbeats
    broker._rt.temporary_queues.release(used.name)
    with _other_broker(target, clock) as other:
        clock.advance(500)
        used.send("still in use")
        broker.close()  # writes its counters; holds nothing any more
        clock.advance(200)  # idle: 700 s since creation; used: 200 s since its send
        assert other.reap_idle_queues() == [idle.name]
        clock.advance(600)  # the send's minute ended more than 600 s ago
        assert other.reap_idle_queues() == [used.name]
        assert other.list_queues() == []
        reasons = [e.detail for e in other.audit() if e.action == "DeleteQueue"]
        assert reasons == [{"reason": "idle", "idle_timeout": 600}] * 2


def test_the_holder_keeps_its_queue_alive_with_heartbeats(
    broker: durableq.Broker, target: str, clock: FakeClock
) -> None:
    held = broker.temporary_queue("held", idle_timeout=600)
    with _other_broker(target, clock) as other:
        for _ in range(5):
            clock.advance(300)
            broker._rt.temporary_queues.reap(broker._rt.now_ms())  # what its heartbeat thread does
            assert other.reap_idle_queues() == []
        assert held.name in other.list_queues()
        broker._rt.temporary_queues.release(held.name)  # the holder lets go
        clock.advance(601)
        assert other.reap_idle_queues() == [held.name]


def _create_and_die(path: str, now: float, ready: multiprocessing.synchronize.Event) -> None:
    broker = durableq.open(path, clock=lambda: now)
    queue = broker.temporary_queue("orphan", idle_timeout=60)
    queue.send("left behind")
    ready.set()
    signal.pause()  # killed here, with the queue held


def test_the_queue_of_a_killed_owner_is_reaped_with_its_messages(target: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    owner = ctx.Process(target=_create_and_die, args=(target, START, ready))
    owner.start()
    assert ready.wait(60), "the owner did not create its queue"
    os.kill(owner.pid, signal.SIGKILL)  # type: ignore[arg-type]
    owner.join()
    clock = FakeClock(START + 30)
    with _other_broker(target, clock) as other:
        (name,) = other.list_queues("orphan-")
        assert other.get_queue(name).stats().approximate_number_of_messages == 1
        clock.advance(120)  # the send's minute ended 60 s after START; 90 s have passed since
        assert other.reap_idle_queues() == [name]
        assert sql_rows(target, "SELECT count(*) FROM durableq_messages") == [(0,)]


def test_a_broker_deletes_the_temporary_queues_it_holds_when_it_closes(target: str) -> None:
    with durableq.open(target) as broker:
        broker.create_queue("kept")
        broker.temporary_queue()
    with durableq.open(target) as broker:
        assert broker.list_queues() == ["kept"]


def test_temporary_queues_are_not_settable_into_being(broker: durableq.Broker) -> None:
    queue = broker.create_queue("plain")
    with pytest.raises(durableq.InvalidAttributeName):
        queue.set_attributes(idle_timeout=60)
    assert "idle_timeout" not in queue.attributes()
