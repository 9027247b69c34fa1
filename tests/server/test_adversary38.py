"""Adversary 38: the endpoint's fast path (a POST served from its connection's callbacks) and the
ASGI path beside it, where an answer meets a client that has gone."""

from __future__ import annotations

import socket
from pathlib import Path

from durableq.server import serve
from tests.conftest import HeldLook, until

from .test_adversary37 import assert_put_back
from .test_capacity import address, answer, health, impatient, json_request


def test_a_receive_whose_body_came_on_its_own_puts_back_what_nobody_got(
    tmp_path: Path, held_look: HeldLook
) -> None:
    """The promise "the answer that finds the client gone puts the messages back" held only for a
    request whose body came in the same read as its head (the fast path).  A client that sends the body
    on its own (here after ``Expect: 100-continue``, which some SDKs send; a client writing head and
    body in two writes is the same path) goes through ASGI, whose answer to a client that hung up while
    the first look claimed left the message hidden for its visibility timeout, its receive counted."""
    server = serve(tmp_path / "q.db", port=0, durability="normal")
    try:
        sqs = impatient(server)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="there before the look")
        before = health(server)[1]["connections"]
        request = json_request("ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 600})
        head, _, body = request.partition(b"\r\n\r\n")
        sock = socket.create_connection(address(server))
        sock.sendall(head + b"\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 100")  # the application reads the body: ASGI
        held_look.arm()
        sock.sendall(body)
        until(held_look.holding, "the first look is held")
        sock.close()
        until(lambda: health(server)[1]["connections"] == before, "the server saw the hang-up")
        held_look.open()
        # The look claims first (visible 1 before it is no sign of the put-back), then its answer finds
        # the client gone and puts the message back.
        until(lambda: not held_look.holding(), "the look has claimed")
        assert_put_back(sqs, url, "there before the look")
    finally:
        server.shutdown()


def test_pipelined_requests_in_one_write_are_each_answered_in_order(tmp_path: Path) -> None:
    """Held: a receive, a send, a GET and an HTTP/1.0 receive in one write; the first is served on the
    connection's callbacks, the others (queued behind it) through ASGI; the last closes the connection.
    A SendMessage split at every byte and one with a chunked body are served too."""
    server = serve(tmp_path / "q.db", port=0, durability="normal")
    try:
        sqs = impatient(server)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="first")
        host, port = address(server)
        receive = json_request("ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 600})
        data = (
            receive
            + json_request("SendMessage", {"QueueUrl": url, "MessageBody": "second"})
            + f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
            + receive.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1)
        )
        with socket.create_connection((host, port)) as sock:
            sock.sendall(data)
            answers = answer(sock)
        assert answers.count(b"HTTP/1.1 ") == answers.count(b"HTTP/1.1 200 OK\r\n") == 4
        bodies = [b'"Body": "first"', b'"MD5OfMessageBody"', b'"status": "ok"', b'"Body": "second"']
        places = [answers.find(body) for body in bodies]
        assert -1 not in places and places == sorted(places)
        assert answers.lower().count(b"connection: close") == 1

        with socket.create_connection((host, port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for byte in json_request("SendMessage", {"QueueUrl": url, "MessageBody": "split"}):
                sock.send(bytes([byte]))
            assert sock.recv(20).startswith(b"HTTP/1.1 200")
        chunked = json_request("SendMessage", {"QueueUrl": url, "MessageBody": "chunked"})
        head, _, body = chunked.partition(b"\r\n\r\n")
        head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.startswith(b"Content-Length"))
        with socket.create_connection((host, port)) as sock:
            sock.sendall(
                head + b"\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
            )
            assert sock.recv(20).startswith(b"HTTP/1.1 200")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        assert sorted(m["Body"] for m in got) == ["chunked", "split"]
    finally:
        server.shutdown()
