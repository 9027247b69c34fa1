"""Every row of the SQS wording table is reached by the library error it is written for.

The rows match the library's errors by their code and fields (reason, parameter);
an error that lost its fields would silently reach clients in durableq's words.
Each case raises the library error for real and checks that its row (and only a
row) words it.  The endpoint's own refusals of a request are in SQS's words as
raised, and no row touches them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq import SendEntry
from durableq.errors import DurableQError
from durableq.server.actions import queues
from durableq.server.actions.call import Call
from durableq.server.params import Params
from durableq.server.queue_attributes import to_settings
from durableq.server.urls import Endpoint
from durableq.server.wording import TABLE, word

from ..conftest import FakeClock

ENDPOINT = Endpoint("us-east-1", "000000000000", "localhost")


def _raised(action: Callable[[], Any]) -> DurableQError:
    with pytest.raises(DurableQError) as raised:
        action()
    return raised.value


CASES: dict[str, Callable[[durableq.Broker, durableq.Queue, durableq.Queue, FakeClock], DurableQError]] = {
    "no queue": lambda b, q, f, c: _raised(lambda: b.get_queue("nowhere")),
    "bad name": lambda b, q, f, c: _raised(lambda: b.create_queue("no spaces")),
    "fifo name": lambda b, q, f, c: _raised(lambda: b.create_queue("plain", fifo=True)),
    "exists": lambda b, q, f, c: _raised(lambda: b.create_queue("std", visibility_timeout=5)),
    "fifo-only setting": lambda b, q, f, c: _raised(
        lambda: b.create_queue("x", content_based_deduplication=True)
    ),
    "setting range": lambda b, q, f, c: _raised(lambda: q.set_attributes(retention_period=1)),
    "tags": lambda b, q, f, c: _raised(lambda: q.tag(**{f"k{i}": "v" for i in range(51)})),
    "label exists": lambda b, q, f, c: _raised(
        lambda: q.add_permission("p", ["111122223333"], ["SendMessage"])
    ),
    "no label": lambda b, q, f, c: _raised(lambda: q.remove_permission("none")),
    "bad action": lambda b, q, f, c: _raised(lambda: q.add_permission("n", ["111122223333"], ["Fly"])),
    "no action": lambda b, q, f, c: _raised(lambda: q.add_permission("n", ["111122223333"], [])),
    "no account": lambda b, q, f, c: _raised(lambda: q.add_permission("n", [], ["SendMessage"])),
    "many actions": lambda b, q, f, c: _raised(
        lambda: q.add_permission("n", ["111122223333"], ["SendMessage"] * 8)
    ),
    "too big": lambda b, q, f, c: _raised(lambda: q.send("x" * 1_048_577)),
    "empty body": lambda b, q, f, c: _raised(lambda: q.send("")),
    "bad character": lambda b, q, f, c: _raised(lambda: q.send("\x07")),
    "attribute name": lambda b, q, f, c: _raised(lambda: q.send("x", attributes={"a b": "v"})),
    "attribute type": lambda b, q, f, c: _raised(
        lambda: q.send("x", attributes={"a": durableq.Attribute("Date", "1")})
    ),
    "not a number": lambda b, q, f, c: _raised(
        lambda: q.send("x", attributes={"a": durableq.Attribute("Number", "one")})
    ),
    "many attributes": lambda b, q, f, c: _raised(
        lambda: q.send("x", attributes={f"a{i}": "v" for i in range(11)})
    ),
    "no group": lambda b, q, f, c: _raised(lambda: f.send("x", deduplication_id="d")),
    "no dedup": lambda b, q, f, c: _raised(lambda: f.send("x", group_id="g")),
    "fifo delay": lambda b, q, f, c: _raised(
        lambda: f.send("x", group_id="g", deduplication_id="d", delay_seconds=5)
    ),
    "fifo ids on standard": lambda b, q, f, c: _raised(lambda: q.send("x", deduplication_id="d")),
    "range": lambda b, q, f, c: _raised(lambda: q.receive(11)),
    "delay range": lambda b, q, f, c: _raised(lambda: q.send("x", delay_seconds=901)),
    "12 hours": lambda b, q, f, c: _raised(lambda: _long_change(q, c)),
    "bad handle": lambda b, q, f, c: _raised(lambda: q.delete("not-a-handle")),
    "not in flight": lambda b, q, f, c: _raised(lambda: _stale_change(q, c)),
    "gone": lambda b, q, f, c: _raised(lambda: _gone_change(q)),
    "empty batch": lambda b, q, f, c: _raised(lambda: q.send_batch([])),
    "many entries": lambda b, q, f, c: _raised(
        lambda: q.send_batch([SendEntry(str(i), "x") for i in range(11)])
    ),
    "entry id": lambda b, q, f, c: _raised(lambda: q.send_batch([SendEntry("!", "x")])),
    "same ids": lambda b, q, f, c: _raised(lambda: q.send_batch([SendEntry("a", "x"), SendEntry("a", "x")])),
    "batch too long": lambda b, q, f, c: _raised(
        lambda: q.send_batch([SendEntry(str(i), "x" * 200_000) for i in range(6)])
    ),
}
#: The endpoint's own checks of a request, and SQS's words they raise in.
OWN: dict[str, tuple[Callable[[durableq.Broker], DurableQError], str]] = {
    "unknown attribute": (
        lambda b: _raised(lambda: to_settings({"Colour": "red"}, ENDPOINT)),
        "Unknown Attribute Colour.",
    ),
    "missing parameter": (
        lambda b: _raised(lambda: Params({}).required("QueueName")),
        "The request must contain the parameter QueueName.",
    ),
    "no tags": (
        lambda b: _raised(
            lambda: queues.tag_queue(Call(b, ENDPOINT, Params({"QueueUrl": "std", "Tags": {}})))
        ),
        "The request must contain the parameter Tags.",
    ),
    "no tag keys": (
        lambda b: _raised(
            lambda: queues.untag_queue(Call(b, ENDPOINT, Params({"QueueUrl": "std", "TagKeys": []})))
        ),
        "Tag keys must be between 1 and 128 characters in length.",
    ),
}


def _received(queue: durableq.Queue) -> durableq.Message:
    queue.send("m")
    (message,) = queue.receive()
    return message


def _long_change(queue: durableq.Queue, clock: FakeClock) -> None:
    message = _received(queue)
    clock.advance(1)
    queue.change_visibility(message.receipt_handle, 43_200)  # would end 12 h and 1 s after the receive


def _stale_change(queue: durableq.Queue, clock: FakeClock) -> None:
    first = _received(queue)
    clock.advance(31)
    queue.receive()
    queue.change_visibility(first.receipt_handle, 10)


def _gone_change(queue: durableq.Queue) -> None:
    message = _received(queue)
    queue.delete(message.receipt_handle)
    queue.change_visibility(message.receipt_handle, 10)


def test_every_row_rewords_the_library_error_it_is_written_for(tmp_path: Path) -> None:
    matched: set[int] = set()
    for case, make_error in CASES.items():
        clock = FakeClock()
        with durableq.open(
            tmp_path / f"{len(matched)}-{case}.db", clock=clock, durability="normal"
        ) as broker:
            queue = broker.create_queue("std")
            queue.add_permission("p", ["111122223333"], ["SendMessage"])
            error = make_error(broker, queue, broker.create_queue("jobs.fifo", fifo=True), clock)
        rows = [n for n, row in enumerate(TABLE) if row.matches(error, False)]
        assert rows, f"{case}: no row of the wording table matches {error.code}: {error.message}"
        worded = word(error, lambda name: None, action="Action", queue="std")
        assert worded.message != error.message, case
        matched.add(rows[0])
    # A batch entry's invalid handle has its own row, checked through the endpoint (test_sqs_wording).
    unmatched = [row for n, row in enumerate(TABLE) if n not in matched and row.entry is not True]
    assert not unmatched, f"rows no case reaches: {unmatched}"


def test_the_endpoints_own_refusals_are_in_sqs_words_already(tmp_path: Path) -> None:
    with durableq.open(tmp_path / "own.db", durability="normal") as broker:
        broker.create_queue("std")
        for case, (make_error, text) in OWN.items():
            error = make_error(broker)
            assert error.message == text, case
            assert not [row for row in TABLE if row.matches(error, False)], case
            assert word(error, lambda name: None, action="Action", queue="std").message == text
