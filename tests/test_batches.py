"""Batch send, delete and change visibility: batch-level errors and per-entry failures."""

from __future__ import annotations

import pytest

import durableq
from durableq import SendEntry
from tests.conftest import FakeClock


def test_send_batch_sends_each_entry_and_reports_per_entry(queue: durableq.Queue) -> None:
    result = queue.send_batch(
        [
            SendEntry("a", "first", attributes={"n": 1}),
            SendEntry("b", ""),
            SendEntry("c", "third", delay_seconds=5),
            SendEntry("d", "\x00"),
            SendEntry("e", "fifth", delay_seconds=1000),
        ]
    )
    assert [s.id for s in result.successful] == ["a", "c"]
    assert all(s.message_id and s.md5_of_body and s.sequence_number is None for s in result.successful)
    assert {(f.id, f.code) for f in result.failed} == {
        ("b", "InvalidParameterValue"),
        ("d", "InvalidMessageContents"),
        ("e", "InvalidParameterValue"),
    }
    assert all(f.message and f.sender_fault for f in result.failed)
    assert queue.stats().approximate_number_of_messages == 1
    assert queue.stats().approximate_number_of_messages_delayed == 1


def test_batch_level_errors(queue: durableq.Queue) -> None:
    with pytest.raises(durableq.EmptyBatchRequest):
        queue.send_batch([])
    with pytest.raises(durableq.TooManyEntriesInBatchRequest, match="at most 10"):
        queue.send_batch([SendEntry(str(i), "x") for i in range(11)])
    with pytest.raises(durableq.BatchEntryIdsNotDistinct, match="'a'"):
        queue.send_batch([SendEntry("a", "x"), SendEntry("a", "y")])
    # The first entry that repeats an earlier id is named, as SQS names it.
    with pytest.raises(durableq.BatchEntryIdsNotDistinct, match="'b'"):
        queue.send_batch([SendEntry(i, "x") for i in ("a", "b", "b", "a")])
    for bad_id in ("", "x" * 81, "has space", "dot."):
        with pytest.raises(durableq.InvalidBatchEntryId):
            queue.send_batch([SendEntry(bad_id, "x")])
    with pytest.raises(durableq.InvalidParameterValue, match="SendEntry"):
        queue.send_batch(["just a body"])  # type: ignore[list-item]
    assert queue.stats().approximate_number_of_messages == 0


def test_a_batch_may_hold_1_mib_in_all(broker: durableq.Broker) -> None:
    queue = broker.create_queue("big", maximum_message_size=1_048_576)
    queue.send_batch([SendEntry(str(i), "x" * 104_857) for i in range(10)])  # 1,048,570 bytes
    with pytest.raises(durableq.BatchRequestTooLong, match="1048580 bytes"):
        queue.send_batch([SendEntry(str(i), "x" * 104_858) for i in range(10)])
    assert queue.stats().approximate_number_of_messages == 10


def test_an_oversized_entry_fails_alone(broker: durableq.Broker) -> None:
    queue = broker.create_queue("small", maximum_message_size=1024)
    result = queue.send_batch([SendEntry("ok", "x"), SendEntry("big", "x" * 2000)])
    assert [s.id for s in result.successful] == ["ok"]
    assert [(f.id, f.code) for f in result.failed] == [("big", "InvalidParameterValue")]


def test_delete_batch_with_handles_or_pairs(queue: durableq.Queue) -> None:
    queue.send_batch([SendEntry(str(i), f"m{i}") for i in range(4)])
    messages = queue.receive(4)
    by_position = queue.delete_batch([messages[0].receipt_handle, "malformed"])
    assert [s.id for s in by_position.successful] == ["0"]
    assert [(f.id, f.code) for f in by_position.failed] == [("1", "ReceiptHandleIsInvalid")]
    by_id = queue.delete_batch([("x", messages[1].receipt_handle), ("y", messages[2].receipt_handle)])
    assert [s.id for s in by_id.successful] == ["x", "y"]
    assert queue.stats().approximate_number_of_messages_not_visible == 1


def test_delete_batch_limits(queue: durableq.Queue) -> None:
    with pytest.raises(durableq.EmptyBatchRequest):
        queue.delete_batch([])
    with pytest.raises(durableq.TooManyEntriesInBatchRequest):
        queue.delete_batch(["h"] * 11)
    with pytest.raises(durableq.BatchEntryIdsNotDistinct):
        queue.delete_batch([("a", "h1"), ("a", "h2")])
    with pytest.raises(durableq.InvalidParameterValue, match="receipt handle or an"):
        queue.delete_batch([("a", "b", "c")])  # type: ignore[list-item]
    with pytest.raises(durableq.InvalidParameterValue, match="must be a list"):
        queue.delete_batch("one handle")  # type: ignore[arg-type]


def test_change_visibility_batch(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send_batch([SendEntry(str(i), f"m{i}") for i in range(3)])
    first, second, third = queue.receive(3)
    queue.change_visibility(third.receipt_handle, 0)
    [again] = queue.receive()
    assert again.message_id == third.message_id
    result = queue.change_visibility_batch(
        [
            ("a", first.receipt_handle, 0),
            ("b", second.receipt_handle, 50_000),
            ("c", third.receipt_handle, 10),
        ]
    )
    assert [s.id for s in result.successful] == ["a"]
    assert {(f.id, f.code) for f in result.failed} == {
        ("b", "InvalidParameterValue"),
        ("c", "MessageNotInflight"),
    }
    positional = queue.change_visibility_batch([(again.receipt_handle, 0)])
    assert [s.id for s in positional.successful] == ["0"]
