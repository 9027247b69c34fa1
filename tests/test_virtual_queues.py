"""Virtual queues: many queues multiplexed on one host queue; each receives only its own messages,
long polls wake for their own, and creating one writes nothing."""

from __future__ import annotations

import asyncio
import threading

import pytest

import durableq
from durableq import RedrivePolicy, SendEntry
from tests.conftest import FakeClock, sql_rows, until_long_polls_wait


def test_each_virtual_queue_receives_only_its_own(broker: durableq.Broker, target: str) -> None:
    host = broker.create_queue("replies")
    alpha, beta = host.virtual_queue("alpha"), host.virtual_queue("beta")
    assert (alpha.name, alpha.host) == ("replies#alpha", "replies")
    alpha.send("a1")
    beta.send_batch([SendEntry("1", "b1"), SendEntry("2", "b2")])
    host.send("h1")
    assert [m.body for m in beta.receive(10)] == ["b1", "b2"]
    assert [m.body for m in host.receive(10)] == ["h1"]  # the host's own messages only
    (a1,) = alpha.receive(10)
    assert a1.body == "a1" and alpha.receive(10) == []
    alpha.change_visibility(a1.receipt_handle, 0)
    (again,) = alpha.receive()
    alpha.delete(again.receipt_handle)
    assert alpha.receive() == [] and host.virtual_queue("alpha").receive() == []
    stats = host.stats()  # the messages live in the host: counted there
    assert stats.approximate_number_of_messages_not_visible == 3
    # No queue row, no table: only marked rows.
    assert sql_rows(target, "SELECT count(*) FROM durableq_queues") == [(1,)]


def test_a_long_poll_of_a_virtual_queue_wakes_for_its_own_messages_only(broker: durableq.Broker) -> None:
    host = broker.create_queue("replies")
    mine, other = host.virtual_queue("mine"), host.virtual_queue("other")
    received: list[durableq.Message] = []
    poll = threading.Thread(target=lambda: received.extend(mine.receive(wait_time=20)))
    poll.start()
    until_long_polls_wait()
    other.send("not for the poll")
    host.send("nor this")
    mine.send("for the poll")
    poll.join()
    assert [m.body for m in received] == ["for the poll"]
    assert [m.body for m in other.receive()] == ["not for the poll"]


def test_receive_async_of_a_virtual_queue(broker: durableq.Broker) -> None:
    queue = broker.create_queue("replies").virtual_queue("v")
    queue.send("x")
    assert [m.body for m in asyncio.run(queue.receive_async())] == ["x"]


def test_a_dead_lettered_virtual_message_arrives_as_a_plain_one(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    dlq = broker.create_queue("dlq")
    host = broker.create_queue("host", visibility_timeout=1, redrive_policy=RedrivePolicy("dlq", 1))
    virtual = host.virtual_queue("v")
    virtual.send("poison")
    assert len(virtual.receive()) == 1
    clock.advance(2)
    assert virtual.receive() == []  # received once already: moved instead
    assert [m.body for m in dlq.receive()] == ["poison"]


def test_management_is_the_hosts_and_bad_names_are_refused(broker: durableq.Broker) -> None:
    host = broker.create_queue("host")
    virtual = host.virtual_queue("v")
    for call in (
        virtual.attributes,
        virtual.stats,
        virtual.purge,
        lambda: virtual.set_attributes(delay_seconds=1),
    ):
        with pytest.raises(durableq.UnsupportedOperation, match="host queue 'host'"):
            call()
    for bad in ("", "a b", "x" * 81, "v#w", None):
        with pytest.raises(durableq.InvalidParameterValue, match="virtual queue name"):
            host.virtual_queue(bad)  # type: ignore[arg-type]
    fifo = broker.create_queue("f.fifo", fifo=True)
    with pytest.raises(durableq.UnsupportedOperation, match="standard queues"):
        fifo.virtual_queue("v")
    broker.delete_queue("host")
    with pytest.raises(durableq.QueueDoesNotExist):
        virtual.send("gone")


def test_a_virtual_queue_is_a_sibling_of_its_host_not_a_queue(broker: durableq.Broker) -> None:
    """Both are handles on a queue's messages; only a Queue has the queue's own calls, and a virtual
    queue refuses them when called (no method of its own only raises)."""
    from durableq.handle import QueueHandle

    host = broker.create_queue("host")
    virtual = host.virtual_queue("v")
    assert isinstance(host, QueueHandle) and isinstance(virtual, QueueHandle)
    assert not isinstance(virtual, durableq.Queue)
    with pytest.raises(durableq.UnsupportedOperation, match="virtual_queue is a call of the host queue"):
        virtual.virtual_queue("w")
    with pytest.raises(AttributeError):
        virtual.no_such_call  # noqa: B018 - the lookup is what is tested
    with pytest.raises(AttributeError):
        virtual._private  # noqa: B018
