"""Send, receive and delete on standard queues: the rules of SPEC §2-§3."""

from __future__ import annotations

import hashlib
import re

import pytest

import durableq
from durableq import Attribute
from tests.conftest import FakeClock, sql_rows

HANDLE = re.compile(r"\d+\.\d+\.[0-9a-f]{16}\.[0-9a-f]{16}")


def test_send_returns_an_id_and_the_md5_of_the_body(queue: durableq.Queue) -> None:
    result = queue.send("héllo wörld")
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", result.message_id
    )
    assert result.md5_of_body == hashlib.md5("héllo wörld".encode()).hexdigest()
    assert result.sequence_number is None


def test_a_sent_message_is_received_with_its_details(queue: durableq.Queue, clock: FakeClock) -> None:
    sent = queue.send("payload")
    clock.advance(2)
    [message] = queue.receive()
    assert message.message_id == sent.message_id
    assert message.body == "payload" and message.md5_of_body == sent.md5_of_body
    assert message.receive_count == 1
    assert HANDLE.fullmatch(message.receipt_handle)
    assert message.sent_timestamp == int((clock() - 2) * 1000)
    assert message.first_receive_timestamp == int(clock() * 1000)
    assert message.sent_at.timestamp() == clock() - 2
    assert message.first_received_at is not None and message.first_received_at.tzinfo is not None
    assert message.group_id is None and message.sequence_number is None and message.dead_letter_source is None


def test_an_empty_queue_returns_an_empty_list(queue: durableq.Queue) -> None:
    assert queue.receive() == []
    assert queue.receive(10) == []


def test_receive_returns_up_to_max_messages_oldest_first(queue: durableq.Queue, clock: FakeClock) -> None:
    for i in range(15):
        queue.send(f"m{i}")
        clock.advance(0.001)
    first = queue.receive(max_messages=10)
    assert [m.body for m in first] == [f"m{i}" for i in range(10)]
    assert [m.body for m in queue.receive(10)] == [f"m{i}" for i in range(10, 15)]


@pytest.mark.parametrize("bad", [0, 11, -1, 2.0, "3", None, True])
def test_max_messages_must_be_1_to_10(queue: durableq.Queue, bad: object) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="max_messages must be"):
        queue.receive(bad)  # type: ignore[arg-type]


def test_a_received_message_is_hidden_until_its_visibility_timeout(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    queue.send("once")
    [first] = queue.receive()
    assert queue.receive() == []
    clock.advance(29.999)
    assert queue.receive() == []
    clock.advance(0.001)
    [again] = queue.receive()
    assert again.message_id == first.message_id
    assert again.receive_count == 2
    assert again.receipt_handle != first.receipt_handle  # a fresh handle on every receive
    assert again.first_receive_timestamp == first.first_receive_timestamp


def test_a_per_receive_visibility_timeout_overrides_the_queue(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    queue.send("short")
    queue.receive(visibility_timeout=5)
    clock.advance(5)
    assert len(queue.receive(visibility_timeout=0)) == 1
    assert len(queue.receive()) == 1  # visibility 0: visible again at once


@pytest.mark.parametrize("bad", [-1, 43_201, 1.5])
def test_per_receive_visibility_timeout_limits(queue: durableq.Queue, bad: object) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="visibility_timeout must be"):
        queue.receive(visibility_timeout=bad)  # type: ignore[arg-type]


def test_the_queue_delay_holds_messages_back(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue("slow", delay_seconds=60)
    queue.send("later")
    assert queue.receive() == []
    assert queue.stats().approximate_number_of_messages_delayed == 1
    clock.advance(60)
    assert [m.body for m in queue.receive()] == ["later"]


def test_a_per_message_delay_overrides_the_queue_delay(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue("slow", delay_seconds=60)
    queue.send("now", delay_seconds=0)
    queue.send("soon", delay_seconds=10)
    assert [m.body for m in queue.receive(10)] == ["now"]
    clock.advance(10)
    assert [m.body for m in queue.receive(10)] == ["soon"]


@pytest.mark.parametrize("bad", [-1, 901, 0.5, "5"])
def test_per_message_delay_limits(queue: durableq.Queue, bad: object) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="delay_seconds must be"):
        queue.send("x", delay_seconds=bad)  # type: ignore[arg-type]


def test_delete_removes_the_message_for_good(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("done")
    [message] = queue.receive()
    queue.delete(message.receipt_handle)
    clock.advance(3600)
    assert queue.receive() == []
    assert queue.stats().approximate_number_of_messages_not_visible == 0


def test_delete_twice_succeeds_on_a_standard_queue(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("done")
    queue.send("other")
    [message] = queue.receive()
    queue.delete(message.receipt_handle)
    assert queue.delete(message.receipt_handle) is None  # gone already: still a success
    clock.advance(60)  # past the visibility timeout: nothing of the deleted message comes back
    assert [m.body for m in queue.receive(10)] == ["other"]


def test_any_handle_ever_issued_deletes_a_standard_message(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("x")
    [old] = queue.receive()
    clock.advance(30)
    [new] = queue.receive()
    queue.delete(old.receipt_handle)
    clock.advance(30)
    assert queue.receive() == []
    queue.delete(new.receipt_handle)  # already gone: still fine


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "garbage",
        "1.2.3.4",
        "1.1.zzzzzzzzzzzzzzzz.0000000000000000",
        "1.9999999999999999999.aaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbb",  # beyond any SQLite row id
        42,
        None,
    ],
)
def test_a_malformed_handle_is_invalid(queue: durableq.Queue, handle: object) -> None:
    with pytest.raises(durableq.ReceiptHandleIsInvalid, match="malformed"):
        queue.delete(handle)  # type: ignore[arg-type]


def test_a_handle_of_another_queue_is_invalid(broker: durableq.Broker) -> None:
    one, two = broker.create_queue("one"), broker.create_queue("two")
    one.send("x")
    [message] = one.receive()
    with pytest.raises(durableq.ReceiptHandleIsInvalid, match="another queue"):
        two.delete(message.receipt_handle)
    with pytest.raises(durableq.ReceiptHandleIsInvalid, match="another queue"):
        two.change_visibility(message.receipt_handle, 10)
    one.delete(message.receipt_handle)


def test_a_guessed_handle_cannot_delete(queue: durableq.Queue) -> None:
    queue.send("precious")
    [message] = queue.receive()
    queue_id, row, _secret, nonce = message.receipt_handle.split(".")
    forged = f"{queue_id}.{row}.{'0' * 16}.{nonce}"
    queue.delete(forged)  # names no existing message: nothing happens
    assert queue.stats().approximate_number_of_messages_not_visible == 1


def test_a_handle_never_deletes_a_newer_message_in_the_same_row(queue: durableq.Queue, db_path) -> None:
    queue.send("first")
    [first] = queue.receive()
    queue.delete(first.receipt_handle)
    queue.send("second")  # SQLite may give it the freed row id
    queue.delete(first.receipt_handle)
    assert queue.stats().approximate_number_of_messages == 1


def test_bodies_must_be_non_empty_text_of_allowed_characters(queue: durableq.Queue) -> None:
    queue.send("\t\n\r ok \ud7ff\ue000\ufffd\U00010000\U0010ffff")
    with pytest.raises(durableq.InvalidParameterValue, match="must not be empty"):
        queue.send("")
    with pytest.raises(durableq.InvalidParameterValue, match="must be a str"):
        queue.send(b"bytes")  # type: ignore[arg-type]
    for bad in ("\x00", "a\x08b", "\ufffe", "\ud800", "x\x1f"):
        with pytest.raises(durableq.InvalidMessageContents, match="allowed are"):
            queue.send(bad)
    assert queue.stats().approximate_number_of_messages == 1


def test_message_size_counts_body_and_attributes(broker: durableq.Broker) -> None:
    queue = broker.create_queue("small", maximum_message_size=1024)
    queue.send("x" * 1024)
    with pytest.raises(durableq.InvalidParameterValue, match=r"1025 bytes.*at most 1024"):
        queue.send("x" * 1025)
    # name (1) + type "String" (6) + value (1) = 8 bytes of attributes
    queue.send("x" * 1016, attributes={"a": "v"})
    with pytest.raises(durableq.InvalidParameterValue, match="1025 bytes"):
        queue.send("x" * 1017, attributes={"a": "v"})
    with pytest.raises(durableq.InvalidParameterValue, match="bytes"):
        queue.send("é" * 513)  # 1026 bytes in UTF-8
    assert queue.stats().approximate_number_of_messages == 2


def test_typed_attributes_round_trip(queue: durableq.Queue) -> None:
    queue.send(
        "with attributes",
        attributes={
            "text": "héllo",
            "count": 42,
            "ratio": 0.25,
            "blob": b"\x00\xff",
            "custom": Attribute("Number.float", "1.5e3"),
            "label": Attribute("String.json", '{"a": 1}'),
        },
    )
    [message] = queue.receive()
    assert message.attributes == {
        "text": Attribute("String", "héllo"),
        "count": Attribute("Number", "42"),
        "ratio": Attribute("Number", "0.25"),
        "blob": Attribute("Binary", b"\x00\xff"),
        "custom": Attribute("Number.float", "1.5e3"),
        "label": Attribute("String.json", '{"a": 1}'),
    }


@pytest.mark.parametrize(
    ("attributes", "match"),
    [
        ({f"a{i}": "v" for i in range(11)}, "at most 10 attributes"),
        ({"": "v"}, "attribute name"),
        ({".lead": "v"}, "attribute name"),
        ({"trail.": "v"}, "attribute name"),
        ({"a..b": "v"}, "attribute name"),
        ({"AWS.trace": "v"}, "attribute name"),
        ({"amazon.x": "v"}, "attribute name"),
        ({"sp ace": "v"}, "attribute name"),
        ({"n" * 257: "v"}, "attribute name"),
        ({"a": ""}, "empty value"),
        ({"a": b""}, "empty value"),
        ({"a": True}, "bool"),
        ({"a": [1]}, "type list"),
        ({"a": Attribute("Integer", "1")}, "allowed are String, Number and Binary"),
        ({"a": Attribute("Number", "one")}, "not a number"),
        ({"a": Attribute("Number", "nan")}, "not a number"),
        ({"a": Attribute("Number", "1" * 39)}, "38 significant digits"),
        ({"a": Attribute("Number", "1e127")}, "magnitudes"),
        ({"a": Attribute("Binary", "text")}, "needs a bytes value"),
        ({"a": Attribute("String", "\x00")}, "does not allow"),
        ({"a": float("inf")}, "not a number"),
        # SQS takes ASCII decimal numbers only (Python's Decimal would take these).
        ({"a": Attribute("Number", "1_000")}, "not a number"),
        ({"a": Attribute("Number", " 12 ")}, "not a number"),
        ({"a": Attribute("Number", "\u0661\u0662")}, "not a number"),
        ({"a": Attribute("Number", "Infinity")}, "not a number"),
        ({"a": Attribute("Number", "+-1")}, "not a number"),
        ({"a": Attribute("Number", "1e")}, "not a number"),
    ],
)
def test_bad_attributes_are_refused(queue: durableq.Queue, attributes: dict, match: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match=match):
        queue.send("x", attributes=attributes)
    assert queue.stats().approximate_number_of_messages == 0


def test_a_standard_queue_keeps_a_group_id_and_refuses_a_deduplication_id(queue: durableq.Queue) -> None:
    # SQS's fair queues: a group id on a standard queue names the message's tenant.
    queue.send("a1", group_id="tenant-a")
    queue.send_batch([durableq.SendEntry("1", "b1", group_id="tenant-b"), durableq.SendEntry("2", "none")])
    received = queue.receive(max_messages=10)
    groups = [(m.body, m.group_id) for m in received]
    assert groups == [("a1", "tenant-a"), ("b1", "tenant-b"), ("none", None)]
    assert received[0].sequence_number is None and received[0].deduplication_id is None
    with pytest.raises(durableq.InvalidParameterValue, match="FIFO queues only"):
        queue.send("x", deduplication_id="d")
    with pytest.raises(durableq.InvalidParameterValue, match="group_id"):
        queue.send("x", group_id="é" * 3)  # the FIFO rule of the id's characters holds here too
    assert queue.stats().approximate_number_of_messages == 0


def test_a_returned_send_is_in_the_file(queue: durableq.Queue, target: str) -> None:
    result = queue.send("committed")
    [(body,)] = sql_rows(target, "SELECT body FROM durableq_messages WHERE message_id = ?", result.message_id)
    assert body == "committed"


def test_purge_removes_every_message_in_every_state(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("visible")
    queue.send("delayed", delay_seconds=100)
    queue.send("in flight")
    queue.receive()
    queue.purge()
    stats = queue.stats()
    assert (stats.approximate_number_of_messages, stats.approximate_number_of_messages_not_visible) == (0, 0)
    assert stats.approximate_number_of_messages_delayed == 0
    clock.advance(1000)
    assert queue.receive(10) == []


def test_peek_shows_messages_by_state_without_receiving_them(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("held")
    [held] = queue.receive()
    clock.advance(1)
    queue.send("waiting", attributes={"k": "v"})
    clock.advance(1)
    queue.send("later", delay_seconds=60)
    everything = queue.peek(limit=10)
    assert [(m.body, m.state) for m in everything] == [
        ("held", "in_flight"),
        ("waiting", "visible"),
        ("later", "delayed"),
    ]
    assert everything[0].receive_count == 1 and everything[0].message_id == held.message_id
    assert everything[1].attributes["k"].value == "v"
    assert everything[2].visible_at.timestamp() == clock() + 60
    assert [m.body for m in queue.peek(state="delayed")] == ["later"]
    assert [m.body for m in queue.peek(limit=1)] == ["held"]
    before = queue.stats()
    queue.peek(limit=1000)
    assert queue.stats() == before  # no side effects
    assert [m.receive_count for m in queue.receive()] == [0 + 1]  # "waiting" was never received


def test_peek_checks_its_arguments(queue: durableq.Queue) -> None:
    with pytest.raises(
        durableq.InvalidParameterValue, match="state must be one of visible, in_flight, delayed"
    ):
        queue.peek(state="gone")
    with pytest.raises(durableq.InvalidParameterValue, match="limit must be from 1 to 1000"):
        queue.peek(limit=0)


def test_a_trace_header_is_kept(queue: durableq.Queue) -> None:
    queue.send("traced", trace_header="Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
    queue.send_batch([durableq.SendEntry("a", "batched", trace_header="Root=1-2-3")])
    first, second = queue.receive(2)
    assert first.trace_header == "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    assert second.trace_header == "Root=1-2-3"
    for bad in ("", "x" * 1025, "tab\there", "é"):
        with pytest.raises(durableq.InvalidParameterValue, match="trace_header"):
            queue.send("x", trace_header=bad)


@pytest.mark.parametrize("number", ["42", "-1.5", "+7", ".5", "1.", "1e5", "2.5E-3", "0"])
def test_ascii_decimal_numbers_are_accepted(queue: durableq.Queue, number: str) -> None:
    queue.send("x", attributes={"n": Attribute("Number", number)})
    [message] = queue.receive(1)
    assert message.attributes["n"] == Attribute("Number", number)
