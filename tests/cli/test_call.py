"""``durableq call``: a request, its reply printed; a timeout is one error line; `queue list` marks
temporary queues."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

import durableq
from durableq.rpc import Responder

from .conftest import Run


@pytest.fixture
def responder(location: str) -> Iterator[None]:
    with durableq.open(location) as broker:
        responder = Responder(broker.create_queue("resize"), lambda m: f"resized {m.body}", wait_time=1)
        thread = threading.Thread(target=responder.run)
        thread.start()
        yield
        responder.stop()
        thread.join()


def test_call_prints_the_reply(run: Run, responder: None) -> None:
    assert run("call", "resize", "photo 7", "--timeout", "30").stdout == "resized photo 7\n"
    reply = json.loads(run("call", "resize", "--json", input="from stdin").stdout)
    assert reply["body"] == "resized from stdin"
    assert run("queue", "list").stdout == "resize\n"  # the reply queues are gone


def test_no_reply_is_one_error_line(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("nobody")
    result = run("call", "nobody", "hello", "--timeout", "1", code=1)
    assert result.stderr.startswith("error: RequestTimeout: no reply within 1 s to a request on 'nobody'")
    assert result.stderr.count("\n") == 1
    assert run("call", "nobody", "x", "--timeout", "-1", code=1).stderr.startswith(
        "error: InvalidParameterValue: --timeout must be from 0 to 43200 seconds"
    )


def test_queue_list_marks_temporary_queues(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("plain")
    temporary = broker.temporary_queue("tmp", idle_timeout=120)
    assert run("queue", "list").stdout == f"plain\n{temporary.name}  (temporary, idle timeout 120 s)\n"
    assert json.loads(run("queue", "list", "--json").stdout) == ["plain", temporary.name]


def test_call_json_is_a_received_message(run: Run, responder: None, broker: durableq.Broker) -> None:
    """The reply in the shape `receive --json` prints (the same fields, times in ISO 8601 UTC)."""
    reply = json.loads(run("call", "resize", "x", "--json").stdout)
    mirror = broker.create_queue("mirror")
    mirror.send("y")
    [received] = json.loads(run("receive", "mirror", "--json").stdout)
    assert set(reply) == set(received)
    for field in ("sent_at", "first_received_at"):
        assert datetime.fromisoformat(reply[field]).utcoffset() == timedelta(0), field
