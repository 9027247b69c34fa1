"""Adversary 37: the endpoint's ReceiveMessage makes its first look in the pool call that parsed the
request (``Queue.receive_or_wait``), where that meets a client that hangs up."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from typing import Any

from durableq.ops.receive import Receiver
from durableq.server import serve
from tests.conftest import threads_inside, until

from .test_capacity import address, health, impatient, json_request


def test_a_hang_up_while_the_first_look_waits_for_the_write_lock_takes_nothing(tmp_path: Path) -> None:
    """A long poll whose first look waits for the file's write lock (another process's write under
    way, here a sqlite3 connection's ``BEGIN IMMEDIATE``); its client hangs up, and the server sees it
    (the connection gone from ``/health``) before the lock is let go.  As with a hang-up during a later
    look (tests/server/test_capacity.py), the message must go to the next receive, uncounted."""
    server = serve(tmp_path / "q.db", port=0, durability="normal")
    try:
        sqs = impatient(server)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="there before the look")
        writer = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        try:
            before = health(server)[1]["connections"]  # the client's and the health check's own
            sock = socket.create_connection(address(server))
            sock.sendall(json_request("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 20}))
            until(lambda: threads_inside(Receiver.start.__code__), "the first look runs")
            assert health(server)[1]["connections"] == before + 1
            sock.close()
            until(lambda: health(server)[1]["connections"] == before, "the server saw the hang-up")
        finally:
            writer.execute("COMMIT")
            writer.close()
        until(lambda: not threads_inside(Receiver.start.__code__), "the first look has ended")
        assert_put_back(sqs, url, "there before the look")  # after the look
    finally:
        server.shutdown()


def visible(sqs: Any, url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return str(attributes["Attributes"]["ApproximateNumberOfMessages"])


def assert_put_back(sqs: Any, url: str, body: str) -> None:
    """The unanswered claim's message is visible again, and the next receive gets it, its receive
    uncounted (a count of 1 is this receive's own)."""
    until(lambda: visible(sqs, url) == "1", "the unanswered claim is put back")
    got: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, AttributeNames=["All"]).get("Messages", [])
    assert [m["Body"] for m in got] == [body]
    assert got[0]["Attributes"]["ApproximateReceiveCount"] == "1"
