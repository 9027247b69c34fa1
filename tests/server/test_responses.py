"""How answers leave the endpoint: one write per answer, and the HTTP cases that write differently.

The endpoint holds a response's head until its body (``http.py``, ``_OneWrite``) so that both go in
one system call; these tests pin that, and that the cases with no body write (HEAD), a write before
the response (``Expect: 100-continue``) and pipelined requests still answer in full and in order.
They run the endpoint in this process on a real socket, and speak raw HTTP to it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from durableq.server import Server, serve

from .test_capacity import address, json_request


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Server]:
    server = serve(tmp_path / "q.db", port=0, durability="normal")
    try:
        yield server
    finally:
        server.shutdown()


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(address(server), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_answer(sock: socket.socket, buffered: bytearray) -> tuple[int, bytes, bytes]:
    """One answer (status, head, body) from ``sock``, leaving what follows it in ``buffered``."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed mid-answer: {bytes(buffered)!r}"
        buffered += chunk
    head, _, rest = bytes(buffered).partition(b"\r\n\r\n")
    length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0] or 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-body"
        rest += chunk
    buffered[:] = rest[length:]
    return int(head.split()[1]), head, rest[:length]


#: A client in a process of its own (in this one, it could not read before the server, holding the
#: interpreter, had written all): how many of its answers arrive as a head whose body comes later.
SPLIT_ANSWERS = r"""
import socket, sys
sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
request = sys.stdin.buffer.read()
split = 0
for _ in range(100):
    sock.sendall(request)
    head, _, body = sock.recv(65536).partition(b"\r\n\r\n")
    length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0])
    split += len(body) < length
    while len(body) < length:
        body += sock.recv(65536)
print(split)
"""


def test_an_answer_leaves_in_one_write(running: Server) -> None:
    """The head and the body arrive together (uvicorn alone writes them apart: half of these split)."""
    host, port = address(running)
    done = subprocess.run(
        [sys.executable, "-c", SPLIT_ANSWERS, host, str(port)],
        input=json_request("ListQueues", {}),
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert int(done.stdout) == 0, f"{int(done.stdout)} of 100 answers came as a head, then a body"


def test_a_head_request_gets_its_head_and_the_connection_goes_on(running: Server) -> None:
    with connect(running) as sock:
        buffered = bytearray()
        sock.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        while b"\r\n\r\n" not in buffered:
            chunk = sock.recv(65536)
            assert chunk, "the HEAD request got no answer"
            buffered += chunk
        head, _, rest = bytes(buffered).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405"), head
        assert rest == b"", "an answer to HEAD has no body"
        buffered.clear()
        sock.sendall(json_request("ListQueues", {}))
        status, _, body = read_answer(sock, buffered)
        assert status == 200 and json.loads(body) == {}  # no queues yet


def test_expect_100_continue_is_answered_before_the_body_is_sent(running: Server) -> None:
    body = json.dumps({"QueueName": "continued"}).encode()
    with connect(running) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"
            b"X-Amz-Target: AmazonSQS.CreateQueue\r\nExpect: 100-continue\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        buffered = bytearray()
        while b"\r\n\r\n" not in buffered:
            chunk = sock.recv(65536)
            assert chunk, "no 100 Continue came"
            buffered += chunk
        assert bytes(buffered).startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), bytes(buffered)
        del buffered[: len(b"HTTP/1.1 100 Continue\r\n\r\n")]
        sock.sendall(body)
        status, _, answer = read_answer(sock, buffered)
        assert status == 200 and json.loads(answer)["QueueUrl"].endswith("/continued")


def test_pipelined_requests_are_answered_in_full_and_in_order(running: Server) -> None:
    names = [f"piped-{i}" for i in range(5)]
    with connect(running) as sock:
        sock.sendall(b"".join(json_request("CreateQueue", {"QueueName": name}) for name in names))
        buffered = bytearray()
        urls = []
        for _ in names:
            status, _, body = read_answer(sock, buffered)
            assert status == 200
            urls.append(json.loads(body)["QueueUrl"])
        assert [url.rsplit("/", 1)[1] for url in urls] == names
        assert buffered == b""


# -- a POST whose body came with its head is served without ASGI (http.py); the rest through it --------


def header_names(head: bytes) -> list[str]:
    return sorted(line.partition(b":")[0].decode().lower() for line in head.split(b"\r\n")[1:])


def test_an_answer_served_without_asgi_has_the_head_of_one_served_through_it(running: Server) -> None:
    """A POST (served from the connection's callbacks) and a GET (through the ASGI app) of one action:
    the same headers, each request its own UUID request id."""
    with connect(running) as sock:
        buffered = bytearray()
        sock.sendall(json_request("ListQueues", {}))
        post_status, post_head, post_body = read_answer(sock, buffered)
        sock.sendall(
            b"GET /?Action=ListQueues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n"
            b"Content-Type: application/x-amz-json-1.0\r\n\r\n"
        )
        get_status, get_head, get_body = read_answer(sock, buffered)
    assert (post_status, json.loads(post_body)) == (get_status, json.loads(get_body)) == (200, {})
    assert header_names(post_head) == header_names(get_head)
    ids = [
        head.lower().partition(b"x-amzn-requestid: ")[2].partition(b"\r\n")[0].decode()
        for head in (post_head, get_head)
    ]
    assert ids[0] != ids[1] and all(uuid.UUID(i).version == 4 for i in ids), ids


def test_a_body_sent_after_its_head_is_read_and_answered(running: Server) -> None:
    """The head alone, then the body: the request goes to the ASGI app, which reads the body."""
    request = json_request("CreateQueue", {"QueueName": "late-body"})
    head, _, body = request.partition(b"\r\n\r\n")
    with connect(running) as sock:
        sock.sendall(head + b"\r\n\r\n")
        sock.sendall(body)
        status, _, answer = read_answer(sock, bytearray())
    assert status == 200 and json.loads(answer)["QueueUrl"].endswith("/late-body")


def test_an_http_1_0_post_is_answered_and_its_connection_closed(running: Server) -> None:
    request = json_request("ListQueues", {}).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    with connect(running) as sock:
        sock.sendall(request)
        buffered = bytearray()
        status, head, body = read_answer(sock, buffered)
        assert status == 200 and json.loads(body) == {}
        assert b"connection: close" in head.lower()
        assert sock.recv(65536) == b"", "the server keeps an HTTP/1.0 connection open"
