"""Adversary 38: ``Queue.put_back`` through the public API (where it meets deletes, dead letters,
other queues, transactions and bad input)."""

from __future__ import annotations

from pathlib import Path

import pytest

import durableq

from .conftest import FakeClock, payload_dir


def test_put_back_twice_counts_the_receive_off_once(queue: durableq.Queue) -> None:
    """Found: a second put_back of the same messages counted their receive off again (receive_count 0,
    and lower each time: a way round a redrive policy's maxReceiveCount)."""
    queue.send("a")
    first = queue.receive(visibility_timeout=600)
    queue.put_back(first)
    queue.put_back(first)
    [again] = queue.receive(visibility_timeout=600)
    assert again.receive_count == 1
    queue.put_back([again, again])  # the same message twice in one call
    [third] = queue.receive(visibility_timeout=600)
    assert third.receive_count == 1


def test_put_back_twice_on_a_fifo_queue(fifo: durableq.Queue) -> None:
    fifo.send("a", group_id="g", deduplication_id="1")
    first = fifo.receive(visibility_timeout=600)
    fifo.put_back(first)
    fifo.put_back(first)
    [again] = fifo.receive(visibility_timeout=600)
    assert again.receive_count == 1


def test_put_back_after_the_claim_ran_out_counts_nothing_off(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("a")
    first = queue.receive(visibility_timeout=1)
    clock.advance(2)  # visible again: the receive happened and is counted
    queue.put_back(first)
    [again] = queue.receive(visibility_timeout=600)
    assert again.receive_count == 2


def test_put_back_takes_only_messages(queue: durableq.Queue) -> None:
    """Found: anything but a list of Message failed with a raw AttributeError / TypeError."""
    queue.send("a")
    [message] = queue.receive(visibility_timeout=600)
    for wrong in (["not-a-message"], message, [message.receipt_handle], None):
        with pytest.raises(durableq.InvalidParameterValue, match="put_back takes"):
            queue.put_back(wrong)  # type: ignore[arg-type]
    with pytest.raises(durableq.InvalidParameterValue, match="attempt_id"):
        queue.put_back([message], attempt_id="\n")
    assert queue.receive() == []  # none of it touched the claim


def test_put_back_of_another_queues_messages_is_refused(
    broker: durableq.Broker, queue: durableq.Queue
) -> None:
    other = broker.create_queue("other")
    other.send("x")
    queue.send("mine")
    got = other.receive(visibility_timeout=600)
    mine = queue.receive(visibility_timeout=600)
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        queue.put_back(mine + got)  # one of them is not this queue's: nothing is put back
    assert other.receive() == [] and queue.receive() == []


def test_put_back_of_a_received_again_or_moved_message_leaves_it(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    dlq = broker.create_queue("dlq")
    src = broker.create_queue("src", redrive_policy=durableq.RedrivePolicy("dlq", 2))
    src.send("a")
    first = src.receive(visibility_timeout=1)
    clock.advance(2)
    [second] = src.receive(visibility_timeout=600)
    src.put_back(first)  # a stale claim: the second receiver's is left alone
    assert src.receive() == []
    clock.advance(601)
    assert src.receive() == []  # moved to the dead-letter queue on its third receive
    src.put_back([second])  # moved: left alone, its count kept
    [moved] = dlq.receive()
    assert moved.body == "a" and moved.receive_count == 3 and src.receive() == []


def test_put_back_on_a_virtual_queue(broker: durableq.Broker) -> None:
    virtual = broker.create_queue("host").virtual_queue("v")
    virtual.send("a")
    got = virtual.receive(visibility_timeout=600)
    virtual.put_back(got)
    [again] = virtual.receive(visibility_timeout=600)
    assert again.receive_count == 1


def test_put_back_inside_a_transaction_is_refused_clearly(
    broker: durableq.Broker, queue: durableq.Queue
) -> None:
    queue.send("a")
    got = queue.receive(visibility_timeout=600)
    with broker.transaction(), pytest.raises(durableq.InvalidParameterValue, match="transaction"):
        queue.put_back(got)
    queue.put_back(got)
    [again] = queue.receive(visibility_timeout=600)
    assert again.receive_count == 1


def test_put_back_on_an_encrypted_queue_with_a_payload(
    target: str, db_path: Path, clock: FakeClock, tmp_path: Path
) -> None:
    keyring = durableq.Keyring(tmp_path / "keys.json")
    keyring.create("orders")
    with durableq.open(
        target, clock=clock, durability="normal", keyring=keyring, payload_dir=payload_dir(target, db_path)
    ) as broker:
        orders = broker.create_queue("orders", kms_master_key_id="alias/orders", large_payloads=True)
        big = "secret " * 50_000
        orders.send(big)
        got = orders.receive(visibility_timeout=600)
        orders.put_back(got)
        [again] = orders.receive(visibility_timeout=600)
        assert (again.body, again.receive_count) == (big, 1)
        orders.delete(again.receipt_handle)
        assert orders.receive() == []
