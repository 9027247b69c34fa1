"""A message this broker cannot open never wedges its queue (issue 27).

The rule (README, Guarantees: "undecryptable messages"): a broker whose keyring is usable and holds
the queue's key receives a message it cannot open (its data key was wrapped by a key this keyring
lacks, or the data key is damaged) like any other, handed out *flagged*: ``message.unreadable`` holds
the error and its body raises it.  It counts as a receive, so the redrive policy dead-letters it after
``max_receive_count``; its holder may delete it; a broker that holds its key receives it as usual;
without either it expires at its retention.  The other messages of the queue are received all along.

The poisoned messages here are sent by a "stranger": a process whose keyring holds a key under the
same alias with other material (as a process opened with a wrong keyring path was, before such a path
became an error).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durableq

from .conftest import FakeClock, payload_dir, sql_rows, sql_run

SSE = {"sqs_managed_sse_enabled": True}


@pytest.fixture
def ours(tmp_path: Path) -> durableq.Keyring:
    ring = durableq.Keyring(tmp_path / "keys.json")
    ring.create("aws/sqs")
    ring.create("archive")
    return ring


@pytest.fixture
def theirs(tmp_path: Path) -> durableq.Keyring:
    """The stranger's keyring: the same aliases, other key material."""
    ring = durableq.Keyring(tmp_path / "stranger.json")
    ring.create("aws/sqs")
    ring.create("archive")
    return ring


def _open(target: str, db_path: Path, clock: FakeClock, keyring: Any) -> durableq.Broker:
    return durableq.open(
        target, clock=clock, durability="normal", keyring=keyring, payload_dir=payload_dir(target, db_path)
    )


@pytest.fixture
def consumer(
    target: str, db_path: Path, clock: FakeClock, ours: durableq.Keyring
) -> Iterator[durableq.Broker]:
    with _open(target, db_path, clock, ours) as broker:
        yield broker


@pytest.fixture
def stranger(
    target: str, db_path: Path, clock: FakeClock, theirs: durableq.Keyring, consumer: durableq.Broker
) -> Iterator[durableq.Broker]:
    with _open(target, db_path, clock, theirs) as broker:
        yield broker


def _flagged(message: durableq.Message, error: type[durableq.DurableQError]) -> None:
    """``message`` is handed out flagged with ``error``: every read of its content raises it."""
    assert isinstance(message.unreadable, error), message.unreadable
    with pytest.raises(error):
        message.body  # noqa: B018 - the property raises
    with pytest.raises(error):
        message.md5_of_body  # noqa: B018
    with pytest.raises(error):
        message.open_payload()
    assert message.attributes == {}


# -- standard queues -------------------------------------------------------------------


def test_an_undecryptable_message_at_the_head_does_not_block_the_others(
    clock: FakeClock, consumer: durableq.Broker, stranger: durableq.Broker
) -> None:
    consumer.create_queue("orders-dlq", **SSE)
    orders = consumer.create_queue(
        "orders", **SSE, redrive_policy=durableq.RedrivePolicy("orders-dlq", max_receive_count=2)
    )
    poison = stranger.get_queue("orders").send("sealed under the stranger's key")
    clock.advance(1)
    orders.send("good 1", attributes={"n": 1})  # a key of its own: not the stranger's data key
    orders.send("good 2")

    received = {m.message_id: m for m in orders.receive(10)}
    bad = received.pop(poison.message_id)
    _flagged(bad, durableq.KmsAccessDenied)
    assert "not the key the message was encrypted with" in bad.unreadable.message  # type: ignore[union-attr]
    assert bad.receive_count == 1
    assert sorted(m.body for m in received.values()) == ["good 1", "good 2"]
    for message in received.values():
        assert message.unreadable is None
        orders.delete(message.receipt_handle)

    clock.advance(31)  # not deleted: visible again, and received (flagged) a second time
    (again,) = orders.receive(10)
    assert again.message_id == poison.message_id and again.receive_count == 2
    clock.advance(31)
    assert orders.receive(10) == []  # received max_receive_count times: dead-lettered
    assert orders.stats().approximate_number_of_messages == 0
    # The dead-letter queue uses the same key alias: the message moved as it is, and the broker that
    # holds its key reads it there, and deletes it.
    (moved,) = stranger.get_queue("orders-dlq").receive()
    assert (moved.message_id, moved.body, moved.dead_letter_source) == (
        poison.message_id,
        "sealed under the stranger's key",
        "orders",
    )
    stranger.get_queue("orders-dlq").delete(moved.receipt_handle)
    assert consumer.get_queue("orders-dlq").stats().approximate_number_of_messages == 0


def test_without_a_redrive_policy_it_stays_receivable_and_expires_at_its_retention(
    clock: FakeClock, consumer: durableq.Broker, stranger: durableq.Broker
) -> None:
    orders = consumer.create_queue("orders", **SSE, retention_period=120)
    poison = stranger.get_queue("orders").send("poison")
    orders.send("good")
    for count in (1, 2):
        received = {m.message_id: m for m in orders.receive(10, visibility_timeout=10)}
        _flagged(received.pop(poison.message_id), durableq.KmsAccessDenied)
        assert [m.receive_count for m in received.values()] == [count]
        clock.advance(11)
    # A broker that holds its key receives it as usual (and could delete it).
    (theirs,) = [
        m for m in stranger.get_queue("orders").receive(10, visibility_timeout=0) if m.unreadable is None
    ]
    assert (theirs.message_id, theirs.body) == (poison.message_id, "poison")
    clock.advance(120)
    assert orders.receive(10) == []  # retention passed: gone, for every consumer
    assert orders.stats().approximate_number_of_messages == 0


def test_the_holder_of_a_flagged_message_may_delete_it(
    clock: FakeClock, consumer: durableq.Broker, stranger: durableq.Broker
) -> None:
    orders = consumer.create_queue("orders", **SSE)
    poison = stranger.get_queue("orders").send("poison")
    (flagged,) = orders.receive()
    assert flagged.message_id == poison.message_id and flagged.unreadable is not None
    orders.delete(flagged.receipt_handle)  # the consumer's decision: nothing is deleted silently
    clock.advance(60)
    assert orders.receive() == [] and orders.stats().approximate_number_of_messages == 0


def test_a_dead_letter_queue_under_another_key_keeps_it_sealed_as_it_is(
    target: str, clock: FakeClock, consumer: durableq.Broker, stranger: durableq.Broker
) -> None:
    # Moving to a dead-letter queue under another key re-seals a message, which needs its plaintext:
    # one this broker cannot open moves as it is, still sealed under its own data key.
    consumer.create_queue("archive-dlq", kms_master_key_id="alias/archive")
    orders = consumer.create_queue(
        "orders", **SSE, redrive_policy=durableq.RedrivePolicy("archive-dlq", max_receive_count=1)
    )
    poison = stranger.get_queue("orders").send("poison")
    good = orders.send("good")
    orders.receive(10, visibility_timeout=0)
    assert orders.receive(10) == []  # both dead-lettered, in one move
    keys = dict(
        sql_rows(
            target,
            "SELECT m.message_id, d.alias FROM durableq_messages m "
            "JOIN durableq_data_keys d ON d.id = m.data_key_id",
        )
    )
    assert keys == {poison.message_id: "aws/sqs", good.message_id: "archive"}
    received = {m.message_id: m for m in consumer.get_queue("archive-dlq").receive(10)}
    assert received[good.message_id].body == "good"
    _flagged(received[poison.message_id], durableq.KmsAccessDenied)
    clock.advance(31)  # visible again
    found = {m.message_id: m for m in stranger.get_queue("archive-dlq").receive(10)}
    assert found[poison.message_id].body == "poison"  # its key holder reads it there


def test_a_damaged_data_key_is_flagged_as_corrupt_not_blocking(
    target: str, db_path: Path, clock: FakeClock, consumer: durableq.Broker
) -> None:
    orders = consumer.create_queue("orders", **SSE, kms_data_key_reuse_period=60)
    damaged = orders.send("under a damaged data key")
    [(key_id,)] = sql_rows(target, "SELECT data_key_id FROM durableq_messages")
    for wrapped in ("not base64 at all!", "AAAA"):
        assert sql_run(target, "UPDATE durableq_data_keys SET wrapped = ? WHERE id = ?", wrapped, key_id) == 1
        with _open(target, db_path, clock, consumer.keyring) as fresh:  # no key unwrapped yet
            queue = fresh.get_queue("orders")
            sent = queue.send("a new data key for new messages")
            received = {m.message_id: m for m in queue.receive(10, visibility_timeout=0)}
            _flagged(received.pop(damaged.message_id), durableq.MessageCorrupt)
            assert [m.body for m in received.values()] == ["a new data key for new messages"]
            queue.delete(received[sent.message_id].receipt_handle)
            assert f"data key {key_id}" in str(queue.receive(10, visibility_timeout=0)[0].unreadable)


def test_a_keyring_without_the_queues_key_fails_the_receive_and_takes_nothing(
    target: str, db_path: Path, clock: FakeClock, consumer: durableq.Broker, tmp_path: Path
) -> None:
    # Not one message's problem but the consumer's: it is told at once, as SQS's KmsAccessDenied.
    orders = consumer.create_queue("orders", kms_master_key_id="alias/archive")
    orders.send("secret")
    other = durableq.Keyring(tmp_path / "other.json")
    other.create("billing")
    with _open(target, db_path, clock, other) as elsewhere:
        with pytest.raises(durableq.KmsNotFound, match="no key alias/archive"):
            elsewhere.get_queue("orders").receive()
    with _open(target, db_path, clock, None) as keyless:
        with pytest.raises(durableq.KmsAccessDenied, match="without a keyring"):
            keyless.get_queue("orders").receive()
    (message,) = orders.receive()
    assert (message.body, message.receive_count) == ("secret", 1)


# -- FIFO queues -----------------------------------------------------------------------


def test_fifo_an_undecryptable_head_holds_its_group_only_until_dead_lettered(
    clock: FakeClock, consumer: durableq.Broker, stranger: durableq.Broker
) -> None:
    consumer.create_queue("orders-dlq.fifo", fifo=True, **SSE)
    orders = consumer.create_queue(
        "orders.fifo",
        fifo=True,
        **SSE,
        redrive_policy=durableq.RedrivePolicy("orders-dlq.fifo", max_receive_count=1),
    )
    poison = stranger.get_queue("orders.fifo").send("g-1", group_id="g", deduplication_id="1")
    clock.advance(1)
    orders.send("g-2", group_id="g", deduplication_id="2")
    orders.send("h-1", group_id="h", deduplication_id="3")

    (head,) = orders.receive(1)  # the head of group g, flagged
    assert head.message_id == poison.message_id
    _flagged(head, durableq.KmsAccessDenied)
    # While it is in flight its group waits, as for any message; the other groups are served.
    (other,) = orders.receive(10)
    assert other.body == "h-1"
    orders.delete(other.receipt_handle)
    clock.advance(31)
    # Not deleted, received max_receive_count times: dead-lettered, and the group goes on.
    (next_in_group,) = orders.receive(10)
    assert (next_in_group.body, next_in_group.unreadable) == ("g-2", None)
    (moved,) = stranger.get_queue("orders-dlq.fifo").receive()
    assert (moved.message_id, moved.body) == (poison.message_id, "g-1")
