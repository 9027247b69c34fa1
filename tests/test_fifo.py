"""FIFO queues: message groups, deduplication, sequence numbers, receive attempts."""

from __future__ import annotations

import hashlib

import pytest

import durableq
from durableq import RedrivePolicy, SendEntry
from tests.conftest import FakeClock


@pytest.fixture
def dedup(broker: durableq.Broker) -> durableq.Queue:
    return broker.create_queue("orders.fifo", fifo=True, content_based_deduplication=True)


def test_fifo_creation_rules(broker: durableq.Broker) -> None:
    queue = broker.create_queue("a.fifo", fifo=True, deduplication_scope="messageGroup")
    assert queue.fifo and queue.attributes()["deduplication_scope"] == "messageGroup"
    assert queue.attributes()["content_based_deduplication"] is False
    with pytest.raises(durableq.InvalidAttributeValue, match="deduplication_scope must be one of"):
        broker.create_queue("b.fifo", fifo=True, deduplication_scope="group")
    with pytest.raises(durableq.InvalidParameterValue, match="only FIFO queues"):
        broker.create_queue("c.fifo")
    with pytest.raises(durableq.InvalidAttributeValue, match="True or False"):
        broker.create_queue("d.fifo", fifo=True, content_based_deduplication="yes")  # type: ignore[arg-type]
    assert broker.get_queue("a.fifo").fifo


def test_a_group_id_is_required(fifo: durableq.Queue) -> None:
    with pytest.raises(durableq.MissingParameter, match="group_id is required"):
        fifo.send("x", deduplication_id="d")


def test_a_deduplication_id_is_required_unless_content_based(fifo: durableq.Queue) -> None:
    with pytest.raises(durableq.MissingParameter, match="deduplication_id is required"):
        fifo.send("x", group_id="g")


@pytest.mark.parametrize("bad", ["", "x" * 129, "spa ce", "tab\t", "é"])
def test_fifo_ids_are_1_to_128_ascii_characters(dedup: durableq.Queue, bad: str) -> None:
    error = durableq.MissingParameter if bad == "" else durableq.InvalidParameterValue
    with pytest.raises(error):
        dedup.send("x", group_id=bad)
    with pytest.raises(error):
        dedup.send("x", group_id="g", deduplication_id=bad)
    with pytest.raises(error):
        dedup.receive(attempt_id=bad)


@pytest.mark.parametrize("bad", [5, 1.5, ["g"], True])
def test_a_fifo_id_that_is_no_string_is_invalid_not_missing(dedup: durableq.Queue, bad: object) -> None:
    """A group id given as a number (a JSON line's ``"group": 5``) was reported missing."""
    with pytest.raises(durableq.InvalidParameterValue, match="group_id must be a string; got"):
        dedup.send("x", group_id=bad)  # type: ignore[arg-type]
    with pytest.raises(durableq.InvalidParameterValue, match="deduplication_id must be a string; got"):
        dedup.send("x", group_id="g", deduplication_id=bad)  # type: ignore[arg-type]


def test_ids_may_use_ascii_punctuation(dedup: durableq.Queue) -> None:
    group = "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    sent = dedup.send("x", group_id=group, deduplication_id="a" * 128)
    [message] = dedup.receive()
    assert (message.message_id, message.group_id, message.deduplication_id) == (
        sent.message_id,
        group,
        "a" * 128,
    )


def test_per_message_delay_must_be_zero(dedup: durableq.Queue) -> None:
    dedup.send("now", group_id="g", delay_seconds=0)
    with pytest.raises(durableq.InvalidParameterValue, match="only delay_seconds=0"):
        dedup.send("later", group_id="g", delay_seconds=5)


def test_the_queue_delay_applies(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue("slow.fifo", fifo=True, content_based_deduplication=True, delay_seconds=10)
    queue.send("x", group_id="g")
    assert queue.receive() == []
    clock.advance(10)
    assert [m.body for m in queue.receive()] == ["x"]


def test_sequence_numbers_are_growing_decimal_strings(dedup: durableq.Queue) -> None:
    numbers = [dedup.send(f"m{i}", group_id=f"g{i % 3}").sequence_number for i in range(12)]
    assert all(n is not None and n.isdigit() for n in numbers)
    assert [int(n) for n in numbers] == sorted(int(n) for n in numbers)  # type: ignore[arg-type]
    assert numbers == sorted(numbers)  # and in text order too
    assert len(set(numbers)) == 12


def test_a_duplicate_within_5_minutes_returns_the_original_and_enqueues_nothing(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    first = dedup.send("same body", group_id="g")
    clock.advance(299)
    again = dedup.send("same body", group_id="g")
    assert (again.message_id, again.sequence_number) == (first.message_id, first.sequence_number)
    assert dedup.stats().approximate_number_of_messages == 1
    assert sum(m.sent for m in dedup.metrics()) == 1
    clock.advance(1)  # 5 minutes after the first: accepted again
    third = dedup.send("same body", group_id="g")
    assert third.message_id != first.message_id
    assert dedup.stats().approximate_number_of_messages == 2


def test_content_based_deduplication_uses_the_sha256_of_the_body(dedup: durableq.Queue) -> None:
    sent = dedup.send("body", group_id="g")
    explicit = dedup.send("other body", group_id="g", deduplication_id=hashlib.sha256(b"body").hexdigest())
    assert explicit.message_id == sent.message_id
    [message] = dedup.receive()
    assert message.deduplication_id == hashlib.sha256(b"body").hexdigest()


def test_deduplication_survives_delete_and_is_cleared_by_purge(fifo: durableq.Queue) -> None:
    first = fifo.send("x", group_id="g", deduplication_id="d1")
    [message] = fifo.receive()
    fifo.delete(message.receipt_handle)
    assert fifo.send("x", group_id="g", deduplication_id="d1").message_id == first.message_id
    assert fifo.receive() == []
    fifo.purge()
    assert fifo.send("x", group_id="g", deduplication_id="d1").message_id != first.message_id
    assert len(fifo.receive()) == 1


def test_deduplication_scope_message_group(broker: durableq.Broker) -> None:
    queue = broker.create_queue("scoped.fifo", fifo=True, deduplication_scope="messageGroup")
    a = queue.send("x", group_id="a", deduplication_id="same")
    b = queue.send("x", group_id="b", deduplication_id="same")
    assert a.message_id != b.message_id
    assert queue.send("x", group_id="a", deduplication_id="same").message_id == a.message_id
    queue_scoped = broker.create_queue("whole.fifo", fifo=True)
    c = queue_scoped.send("x", group_id="a", deduplication_id="same")
    assert queue_scoped.send("y", group_id="b", deduplication_id="same").message_id == c.message_id


def test_messages_of_a_group_come_in_send_order(dedup: durableq.Queue) -> None:
    for i in range(20):
        dedup.send(f"m{i}", group_id="g")
    bodies = []
    while batch := dedup.receive(3):
        bodies += [m.body for m in batch]
        dedup.delete_batch([m.receipt_handle for m in batch])
    assert bodies == [f"m{i}" for i in range(20)]


def test_one_receive_returns_consecutive_messages_of_one_group(dedup: durableq.Queue) -> None:
    for i in range(5):
        dedup.send(f"a{i}", group_id="a")
    batch = dedup.receive(10)
    assert [m.body for m in batch] == [f"a{i}" for i in range(5)]
    assert [m.sequence_number for m in batch] == sorted(m.sequence_number for m in batch)  # type: ignore[type-var]


def test_a_group_in_flight_yields_nothing_more_but_other_groups_are_served(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    dedup.send("a1", group_id="a")
    dedup.send("a2", group_id="a")
    dedup.send("b1", group_id="b")
    [a1] = dedup.receive(1)
    assert a1.body == "a1"
    assert [m.body for m in dedup.receive(10)] == ["b1"]
    assert dedup.receive(10) == []  # a2 waits for a1; b1 is in flight
    dedup.delete(a1.receipt_handle)
    assert [m.body for m in dedup.receive(10)] == ["a2"]


def test_a_group_that_ends_at_a_delayed_message_does_not_stop_other_groups(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    dedup.send("a1", group_id="a")
    dedup.send("b1", group_id="b")
    dedup.set_attributes(delay_seconds=60)
    dedup.send("a2", group_id="a")  # behind a1, and delayed by the queue's new delay
    assert [m.body for m in dedup.receive(10)] == ["a1", "b1"]


def test_a_group_is_free_again_when_its_message_becomes_visible(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    dedup.send("a1", group_id="a")
    dedup.send("a2", group_id="a")
    dedup.receive(1)
    clock.advance(30)
    again = dedup.receive(10)
    assert [m.body for m in again] == ["a1", "a2"]  # the head first, again
    assert again[0].receive_count == 2


def test_releasing_the_head_while_a_later_message_is_in_flight_keeps_the_group_blocked(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    dedup.send("a1", group_id="a")
    dedup.send("a2", group_id="a")
    a1, a2 = dedup.receive(2)
    dedup.change_visibility(a1.receipt_handle, 0)
    assert dedup.receive(10) == []  # a2 is still in flight
    dedup.change_visibility(a2.receipt_handle, 0)
    assert [m.body for m in dedup.receive(10)] == ["a1", "a2"]


def test_delete_needs_the_latest_handle_within_its_visibility(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    dedup.send("x", group_id="g")
    [old] = dedup.receive()
    clock.advance(30)
    with pytest.raises(durableq.ReceiptHandleIsInvalid, match="visibility timeout expired"):
        dedup.delete(old.receipt_handle)
    [new] = dedup.receive()
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        dedup.delete(old.receipt_handle)
    with pytest.raises(durableq.MessageNotInflight):
        dedup.change_visibility(old.receipt_handle, 10)
    dedup.delete(new.receipt_handle)
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        dedup.delete(new.receipt_handle)  # gone: no longer the latest of anything


def test_a_retried_attempt_returns_the_same_messages_and_handles(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    for i in range(3):
        dedup.send(f"m{i}", group_id="g")
    first = dedup.receive(2, attempt_id="try-1")
    clock.advance(20)
    again = dedup.receive(2, attempt_id="try-1")
    assert [(m.body, m.receipt_handle) for m in again] == [(m.body, m.receipt_handle) for m in first]
    assert [m.receive_count for m in again] == [1, 1]
    clock.advance(29)  # the retry restarted the visibility timeout
    assert dedup.receive(10) == []
    clock.advance(1)
    assert [m.body for m in dedup.receive(10)] == ["m0", "m1", "m2"]


def test_a_retried_attempt_after_a_change_receives_afresh(dedup: durableq.Queue, clock: FakeClock) -> None:
    dedup.send("m0", group_id="g")
    dedup.send("n0", group_id="h")
    [first] = dedup.receive(1, attempt_id="try")
    dedup.change_visibility(first.receipt_handle, 0)
    retried = dedup.receive(1, attempt_id="try")
    assert [m.body for m in retried] == ["m0"]
    assert retried[0].receipt_handle != first.receipt_handle
    assert retried[0].receive_count == 2


def test_an_attempt_id_expires_after_5_minutes(dedup: durableq.Queue, clock: FakeClock) -> None:
    dedup.send("m0", group_id="g")
    [first] = dedup.receive(attempt_id="try")
    clock.advance(300)
    [later] = dedup.receive(attempt_id="try")
    assert later.receipt_handle != first.receipt_handle and later.receive_count == 2


def test_send_batch_keeps_order(dedup: durableq.Queue) -> None:
    result = dedup.send_batch([SendEntry(str(i), f"m{i}", group_id="g") for i in range(10)])
    numbers = [s.sequence_number for s in result.successful]
    assert numbers == sorted(numbers)  # type: ignore[type-var]
    assert [m.body for m in dedup.receive(10)] == [f"m{i}" for i in range(10)]


def test_a_batch_reports_fifo_rule_failures_per_entry(fifo: durableq.Queue) -> None:
    result = fifo.send_batch(
        [
            SendEntry("ok", "x", group_id="g", deduplication_id="1"),
            SendEntry("delay", "x", group_id="g", deduplication_id="3", delay_seconds=1),
            SendEntry("dup", "x", group_id="g", deduplication_id="1"),
        ]
    )
    assert [s.id for s in result.successful] == ["ok", "dup"]
    assert result.successful[0].message_id == result.successful[1].message_id
    assert [(f.id, f.code) for f in result.failed] == [("delay", "InvalidParameterValue")]


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        (SendEntry("no-group", "x", deduplication_id="2"), "group_id is required"),
        (SendEntry("no-dedup", "x", group_id="g"), "deduplication_id is required"),
    ],
)
def test_a_fifo_batch_with_an_entry_missing_its_ids_sends_nothing(
    fifo: durableq.Queue, entry: SendEntry, error: str
) -> None:
    # As SQS: the whole request is refused, not just that entry.
    with pytest.raises(durableq.MissingParameter, match=error):
        fifo.send_batch([SendEntry("ok", "x", group_id="g", deduplication_id="1"), entry])
    assert fifo.stats().approximate_number_of_messages == 0
    assert fifo.send("x", group_id="g", deduplication_id="1").sequence_number == "00000000000000000001"


def test_a_dead_lettered_fifo_message_restarts_its_enqueue_time_and_keeps_order(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    dead = broker.create_queue("dead.fifo", fifo=True)
    queue = broker.create_queue(
        "work.fifo", fifo=True, content_based_deduplication=True, redrive_policy=RedrivePolicy("dead.fifo", 2)
    )
    for i in range(3):
        queue.send(f"m{i}", group_id="g")
    for _ in range(2):
        assert [m.body for m in queue.receive(1)] == ["m0"]
        clock.advance(30)
    moved_at = clock()
    assert [m.body for m in queue.receive(10)] == ["m1", "m2"]  # m0 moved; the rest in order
    [moved] = dead.receive()
    assert moved.body == "m0" and moved.dead_letter_source == "work.fifo" and moved.group_id == "g"
    assert moved.sent_timestamp == int(moved_at * 1000)
    assert moved.receive_count == 3
    assert moved.sequence_number is not None


def test_expired_fifo_messages_leave_their_group(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue(
        "short.fifo", fifo=True, content_based_deduplication=True, retention_period=60
    )
    queue.send("old", group_id="g")
    clock.advance(30)
    queue.send("young", group_id="g")
    clock.advance(30)
    assert [m.body for m in queue.receive(10)] == ["young"]
    assert queue.stats().approximate_number_of_messages_not_visible == 1


def test_fifo_stats(dedup: durableq.Queue) -> None:
    for i in range(4):
        dedup.send(f"m{i}", group_id=f"g{i % 2}")
    dedup.receive(1)
    stats = dedup.stats()
    assert stats.approximate_number_of_messages == 3
    assert stats.approximate_number_of_messages_not_visible == 1


def test_a_fifo_move_task_returns_messages_to_their_groups(broker: durableq.Broker, clock: FakeClock) -> None:
    dead = broker.create_queue("dead.fifo", fifo=True)
    queue = broker.create_queue(
        "work.fifo", fifo=True, content_based_deduplication=True, redrive_policy=RedrivePolicy("dead.fifo", 1)
    )
    queue.send("m0", group_id="g")
    queue.receive()
    clock.advance(30)
    queue.send("m1", group_id="g")
    [m1] = queue.receive(10)
    assert m1.body == "m1" and dead.stats().approximate_number_of_messages == 1
    task = broker.start_message_move("dead.fifo")
    broker.wait_for_message_move(task.task_handle, 30)
    assert broker.list_message_moves("dead.fifo")[0].status == "COMPLETED"
    assert queue.receive(10) == []  # back in group g, behind m1, which is in flight
    queue.delete(m1.receipt_handle)
    [m0] = queue.receive(10)
    assert (m0.body, m0.receive_count, m0.dead_letter_source) == ("m0", 1, None)


def test_deduplication_remembers_ids_when_the_clock_steps_back(
    dedup: durableq.Queue, clock: FakeClock
) -> None:
    first = dedup.send("once", group_id="g")
    clock.advance(600)  # a clock that jumped ahead (or time that really passed)
    [m] = dedup.receive()  # a receive sweeps what has expired by this clock
    dedup.delete(m.receipt_handle)
    clock.advance(-590)  # the clock steps back: 10 s after the first send
    again = dedup.send("once", group_id="g")
    assert (again.message_id, again.sequence_number) == (first.message_id, first.sequence_number)
    assert dedup.stats().approximate_number_of_messages == 0


def test_an_expired_in_flight_message_cannot_be_deleted_on_a_fifo_queue(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    queue = broker.create_queue(
        "short.fifo", fifo=True, retention_period=60, content_based_deduplication=True
    )
    queue.send("x", group_id="g")
    [m] = queue.receive(visibility_timeout=300)
    clock.advance(61)  # expired while in flight; nothing swept it yet
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        queue.delete(m.receipt_handle)


# A receive of one message takes the first group's head in one statement when it may (issue 30); a head
# it may not take falls to the receive's full rules, within the same receive.


def test_a_receive_of_one_moves_an_exhausted_head_and_takes_the_next_group(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    dead = broker.create_queue("dead.fifo", fifo=True)
    queue = broker.create_queue(
        "work.fifo", fifo=True, content_based_deduplication=True, redrive_policy=RedrivePolicy("dead.fifo", 2)
    )
    queue.send("a0", group_id="a")
    for _ in range(2):
        assert [m.body for m in queue.receive(1)] == ["a0"]
        clock.advance(31)
    queue.send("b0", group_id="b")  # group a is served first: it became available earlier
    assert [m.body for m in queue.receive(1)] == ["b0"]
    assert [m.body for m in dead.receive()] == ["a0"]
    assert queue.receive(1) == []  # b is in flight, a is empty


def test_a_receive_of_one_passes_over_an_expired_head(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue(
        "short.fifo", fifo=True, content_based_deduplication=True, retention_period=60
    )
    queue.send("old", group_id="g")
    clock.advance(30)
    queue.send("young", group_id="g")
    clock.advance(30)
    [young] = queue.receive(1)
    assert young.body == "young"
    assert queue.receive(1) == []  # its group is blocked while it is in flight
