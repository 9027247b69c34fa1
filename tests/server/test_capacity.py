"""Capacity and bounds: long polls and slow clients hold up no other request; past a bound, a clear answer.

These run the endpoint in this process (``serve()``: a real uvicorn server on a
real socket) so that each test can set small bounds.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from durableq.server import Bounds, Server, serve
from tests.conftest import HeldLook, until

from .conftest import client

HEAD = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"


@pytest.fixture
def running(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Server]:
    bounds = getattr(request, "param", Bounds())
    server = serve(tmp_path / "q.db", port=0, durability="normal", bounds=bounds)
    try:
        yield server
    finally:
        server.shutdown()


def address(server: Server) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname or "", parts.port or 0


def health(server: Server) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{server.url}/health", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {}


def impatient(server: Server) -> Any:
    """A boto3 client that gives up after 10 s and never retries: a request left waiting fails it."""
    return client(server.url, read_timeout=10, connect_timeout=10, retries={"max_attempts": 1})


def json_request(action: str, members: dict[str, Any]) -> bytes:
    body = json.dumps(members).encode()
    return HEAD + f"X-Amz-Target: AmazonSQS.{action}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


async def exchange(host: str, port: int, payload: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(payload)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0])
        return int(head.split()[1]), await reader.readexactly(length)
    finally:
        writer.close()


def answer(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    data = b""
    while chunk := sock.recv(65_536):
        data += chunk
    return data


def test_hundreds_of_long_polls_hold_up_no_other_request(running: Server) -> None:
    polls = 500  # more than the old server had threads (128), each a connection of its own
    sqs = impatient(running)
    waits = sqs.create_queue(QueueName="waits")["QueueUrl"]
    busy = sqs.create_queue(QueueName="busy")["QueueUrl"]
    host, port = address(running)

    async def scenario() -> list[tuple[int, bytes]]:
        payload = json_request("ReceiveMessage", {"QueueUrl": waits, "WaitTimeSeconds": 20})
        tasks = [asyncio.ensure_future(exchange(host, port, payload)) for _ in range(polls)]
        loop = asyncio.get_running_loop()
        everyone_waits = lambda: health(running)[1].get("waiting_receives") == polls  # noqa: E731
        await loop.run_in_executor(None, until, everyone_waits, "every poll waits")
        for i in range(20):  # sends, receives and deletes go on beside them
            await loop.run_in_executor(None, lambda i=i: sqs.send_message(QueueUrl=busy, MessageBody=f"b{i}"))
            [message] = (await loop.run_in_executor(None, lambda: sqs.receive_message(QueueUrl=busy)))[
                "Messages"
            ]
            await loop.run_in_executor(
                None, lambda m=message: sqs.delete_message(QueueUrl=busy, ReceiptHandle=m["ReceiptHandle"])
            )
        for start in range(0, polls, 10):
            entries = [{"Id": str(i), "MessageBody": f"w{start + i}"} for i in range(10)]
            await loop.run_in_executor(
                None, lambda e=entries: sqs.send_message_batch(QueueUrl=waits, Entries=e)
            )
        return await asyncio.gather(*tasks)

    results = asyncio.run(scenario())
    assert {status for status, _ in results} == {200}
    bodies = [m["Body"] for _, body in results for m in json.loads(body)["Messages"]]
    assert sorted(bodies) == sorted(f"w{i}" for i in range(polls))  # one each, none twice


@pytest.mark.parametrize("running", [Bounds(header_timeout=1.0)], indirect=True)
def test_slow_clients_hold_up_no_other_request_and_are_timed_out(running: Server) -> None:
    slow = []
    for _ in range(300):  # a header line, then nothing: each holds a connection, none a thread
        sock = socket.create_connection(address(running))
        sock.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(sock)
    assert "QueueUrls" not in impatient(running).list_queues()
    for sock in slow:
        reply = answer(sock)
        assert reply.startswith(b"HTTP/1.1 408 ") and b"RequestTimeout" in reply
        sock.close()


@pytest.mark.parametrize("running", [Bounds(body_timeout=0.5)], indirect=True)
def test_a_body_that_never_comes_is_timed_out(running: Server) -> None:
    with socket.create_connection(address(running)) as sock:
        sock.sendall(HEAD + b"X-Amz-Target: AmazonSQS.ListQueues\r\nContent-Length: 100\r\n\r\n{")
        reply = answer(sock)  # the server closes the connection after answering
    assert reply.startswith(b"HTTP/1.1 408 ") and b"RequestTimeout" in reply


def test_oversized_headers_are_refused(running: Server) -> None:
    with socket.create_connection(address(running)) as sock:
        sock.sendall(HEAD + b"X-Padding: " + b"a" * 20_000 + b"\r\n\r\n")
        reply = answer(sock)
    assert reply.startswith(b"HTTP/1.1 431 ") and b"RequestHeaderFieldsTooLarge" in reply


@pytest.mark.parametrize("running", [Bounds(max_connections=5)], indirect=True)
def test_connections_beyond_the_bound_get_503(running: Server) -> None:
    idle = [socket.create_connection(address(running)) for _ in range(4)]
    until(lambda: health(running)[1].get("connections") == 5, "four idle connections and the health check's")
    idle.append(socket.create_connection(address(running)))
    with socket.create_connection(address(running)) as sock:
        sock.sendall(json_request("ListQueues", {}))
        reply = answer(sock)
    assert reply.startswith(b"HTTP/1.1 503 ") and b"ServiceUnavailable" in reply
    for sock in idle:
        sock.close()
    until(lambda: health(running)[0] == 200, "room again once they left")


@pytest.mark.parametrize("running", [Bounds(pool_threads=1, max_pending=0)], indirect=True)
def test_work_beyond_the_pending_bound_gets_503(running: Server) -> None:
    sqs = impatient(running)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    blocker = sqlite3.connect(running.db, isolation_level=None)
    blocker.execute(
        "BEGIN IMMEDIATE"
    )  # the server's next write waits for this lock (its busy timeout is 10 s)
    sent: list[Any] = []
    sender = threading.Thread(target=lambda: sent.append(sqs.send_message(QueueUrl=url, MessageBody="x")))
    sender.start()
    until(lambda: health(running)[0] == 503, "the one thread is busy and no call may wait")
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.list_queues()
    assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    blocker.execute("ROLLBACK")
    blocker.close()
    sender.join(30)
    assert sent and sent[0]["MessageId"]
    assert health(running)[0] == 200


def test_health(running: Server) -> None:
    status, body = health(running)
    assert status == 200 and body["status"] == "ok" and body["waiting_receives"] == 0


def test_a_client_that_hangs_up_on_a_long_poll_takes_nothing(running: Server) -> None:
    sqs = impatient(running)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sock = socket.create_connection(address(running))
    sock.sendall(json_request("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 20}))
    until(lambda: health(running)[1]["waiting_receives"] == 1, "the poll waits")
    sock.close()
    until(lambda: health(running)[1]["waiting_receives"] == 0, "no poll waits")
    sqs.send_message(QueueUrl=url, MessageBody="for the next one")
    [message] = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"


def test_a_hang_up_while_the_poll_claims_takes_nothing(
    running: Server, monkeypatch: pytest.MonkeyPatch, held_look: HeldLook
) -> None:
    """The client hangs up while its long poll's look is claiming (a pool thread, which cannot be
    stopped): the poll counts as waiting until that look has ended and put back what it took, so
    the message goes to the next receive, its receive uncounted."""
    from durableq.ops import async_steps

    seen, settle = threading.Event(), async_steps._settle

    async def settling(*args: Any) -> None:
        seen.set()  # the server saw the hang-up: the poll is cancelled, its running look awaited
        await settle(*args)

    monkeypatch.setattr(async_steps, "_settle", settling)
    sqs = impatient(running)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sock = socket.create_connection(address(running))
    sock.sendall(json_request("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 20}))
    until(lambda: health(running)[1]["waiting_receives"] == 1, "the poll waits")
    held_look.arm()  # the look the send wakes: held until the client has gone
    sqs.send_message(QueueUrl=url, MessageBody="sent while it waited")
    until(held_look.holding, "the poll's look is held")
    sock.close()
    # Only once the server has seen the hang-up may the look claim: a claim answered before that is
    # a lost answer (the message comes back at its visibility timeout), which no server can avoid.
    until(seen.is_set, "the server has seen the hang-up")
    held_look.open()
    until(lambda: health(running)[1]["waiting_receives"] == 0, "the poll has ended")
    [message] = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert message["Body"] == "sent while it waited"
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"


def test_shutdown_ends_waiting_long_polls_empty(tmp_path: Path) -> None:
    server = serve(tmp_path / "q.db", port=0)
    sqs = impatient(server)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    got: list[Any] = []
    poll = threading.Thread(target=lambda: got.append(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)))
    poll.start()
    until(lambda: health(server)[1]["waiting_receives"] == 1, "the poll waits")
    started = time.monotonic()
    server.shutdown()
    poll.join(30)
    assert got and "Messages" not in got[0] and got[0]["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert time.monotonic() - started < 15  # not left to its 20 s deadline


def test_get_slash_says_where_health_is(running: Server) -> None:
    """A person who points a browser-like client at the endpoint learns where its health check is,
    in SQS's own error shape (the query protocol's XML)."""
    try:
        urllib.request.urlopen(f"{running.url}/", timeout=30)
    except urllib.error.HTTPError as refused:
        status, body = refused.code, refused.read().decode()
    else:
        raise AssertionError("GET / was answered 200")
    assert status == 400
    assert "<Code>MissingAction</Code>" in body
    assert "GET /health" in body
