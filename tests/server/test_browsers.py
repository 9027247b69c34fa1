"""Web pages cannot use the endpoint: Origin and foreign Host names are refused, GET never changes state."""

from __future__ import annotations

import http.client
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from .conftest import ServerProcess, client


def request(
    url: str, method: str, form: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    body = urlencode(form)
    try:
        if method == "GET":
            connection.request("GET", f"/?{body}", headers=headers or {})
        else:
            connection.request(
                "POST",
                "/",
                body=body,
                headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})},
            )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture
def full_queue(server: ServerProcess, name: str) -> str:
    sqs = client(server.url)
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="keep me")
    return url


def depth(server: ServerProcess, url: str) -> int:
    attributes = client(server.url).get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_form_posted_by_a_web_page_is_refused(server: ServerProcess, full_queue: str) -> None:
    status, body = request(
        server.url,
        "POST",
        {"Action": "PurgeQueue", "QueueUrl": full_queue},
        {"Origin": "https://evil.example"},
    )
    assert status == 403 and b"<Code>AccessDenied</Code>" in body
    assert depth(server, full_queue) == 1


def test_a_cross_site_fetch_is_refused(server: ServerProcess, full_queue: str) -> None:
    status, body = request(
        server.url, "POST", {"Action": "PurgeQueue", "QueueUrl": full_queue}, {"Sec-Fetch-Site": "cross-site"}
    )
    assert status == 403 and b"AccessDenied" in body
    assert depth(server, full_queue) == 1


def test_a_rebound_host_name_is_refused(server: ServerProcess, full_queue: str) -> None:
    # DNS rebinding: the page's own name now resolves to 127.0.0.1; the browser sends that name as Host.
    for host in ("evil.example", "evil.example:9324", "127.0.0.1.evil.example"):
        status, body = request(
            server.url, "POST", {"Action": "PurgeQueue", "QueueUrl": full_queue}, {"Host": host}
        )
        assert status == 403 and b"AccessDenied" in body, host
    assert depth(server, full_queue) == 1
    for host in ("127.0.0.1", "localhost:9324", "[::1]:80", "LOCALHOST."):
        status, _ = request(server.url, "POST", {"Action": "ListQueues"}, {"Host": host})
        assert status == 200, host


def test_more_host_names_can_be_allowed(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--allow-host", "queues.internal") as running:
        assert (
            request(running.url, "POST", {"Action": "ListQueues"}, {"Host": "queues.internal:9324"})[0] == 200
        )
        assert request(running.url, "POST", {"Action": "ListQueues"}, {"Host": "other.internal"})[0] == 403


def test_a_get_never_changes_state(server: ServerProcess, full_queue: str) -> None:
    for action in ("PurgeQueue", "DeleteQueue", "ReceiveMessage", "SendMessage"):
        status, body = request(
            server.url, "GET", {"Action": action, "QueueUrl": full_queue, "MessageBody": "x"}
        )
        assert status == 405 and b"<Code>MethodNotAllowed</Code>" in body, action
    assert depth(server, full_queue) == 1
    status, body = request(
        server.url, "GET", {"Action": "GetQueueUrl", "QueueName": full_queue.rsplit("/")[-1]}
    )
    assert status == 200 and full_queue.encode() in body
