"""``--json`` is uniform: one message shape in ``receive``, ``peek`` and ``call`` (the same core fields,
the same names), and every time in ISO 8601 UTC, never epoch milliseconds beside it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import durableq

from .conftest import Run

#: The fields every printed message has, received or peeked.
CORE = {
    "message_id",
    "body",
    "receive_count",
    "sent_at",
    "first_received_at",
    "attributes",
    "group_id",
    "deduplication_id",
    "sequence_number",
    "dead_letter_source",
    "payload_size",
}
TIMES = {"sent_at", "first_received_at", "visible_at"}


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    assert moment.utcoffset() is not None and moment.utcoffset().total_seconds() == 0, text  # type: ignore[union-attr]
    return moment


def _check_times(message: dict[str, Any]) -> None:
    assert not [name for name in message if name.endswith("_timestamp")], message
    for name in TIMES & message.keys():
        if message[name] is not None:
            _utc(message[name])


def test_received_and_peeked_messages_share_one_shape(run: Run, broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    queue.send("hello", attributes={"k": "v"})
    [waiting] = json.loads(run("peek", "jobs", "--json").stdout)
    [received] = json.loads(run("receive", "jobs", "--json").stdout)
    [in_flight] = json.loads(run("peek", "jobs", "--json").stdout)
    for message in (waiting, received, in_flight):
        assert CORE <= message.keys(), CORE - message.keys()
        _check_times(message)
    assert waiting["first_received_at"] is None
    assert in_flight["first_received_at"] == received["first_received_at"] is not None
    assert in_flight["sent_at"] == received["sent_at"] == waiting["sent_at"]
    assert _utc(in_flight["visible_at"]) > _utc(received["first_received_at"])
    assert {k: received[k] for k in CORE} == {k: in_flight[k] for k in CORE}
