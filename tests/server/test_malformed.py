"""Client mistakes get a 4xx SQS error in their own protocol: no 5xx, dropped connection or traceback.

Each case below answered 500 InternalFailure (or dropped the connection, or
stored U+FFFD) on the http.server endpoint this one replaced.
"""

from __future__ import annotations

import http.client
import json
import socket
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest

from .conftest import ServerProcess, client

JSON = "application/x-amz-json-1.0"
FORM = "application/x-www-form-urlencoded"


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def call_json(url: str, action: str, members: dict[str, Any]) -> tuple[int, str, bytes]:
    status, headers, body = post(
        url, json.dumps(members).encode(), {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": JSON}
    )
    assert headers["content-type"] == JSON
    return status, json.loads(body)["__type"].rpartition("#")[2] if status != 200 else "", body


def call_query(url: str, form: bytes) -> tuple[int, str, bytes]:
    status, headers, body = post(url, form, {"Content-Type": FORM})
    assert headers["content-type"].startswith("text/xml")
    code = body.partition(b"<Code>")[2].partition(b"</Code>")[0].decode()
    return status, code, body


BIG = "9" * 5_000
NUMBERS = {"sign and sign": "+-1", "superscript two": "²", "5,000 digits": BIG}


@pytest.fixture(scope="module")
def queue(server: ServerProcess) -> str:
    client(server.url).create_queue(QueueName="mistakes")
    return "mistakes"


@pytest.mark.parametrize("number", NUMBERS.values(), ids=NUMBERS.keys())
def test_a_bad_number_in_json(server: ServerProcess, queue: str, number: str) -> None:
    status, code, _ = call_json(
        server.url, "SendMessage", {"QueueUrl": queue, "MessageBody": "x", "DelaySeconds": number}
    )
    assert (status, code) == (400, "InvalidParameterValue")


@pytest.mark.parametrize("number", NUMBERS.values(), ids=NUMBERS.keys())
def test_a_bad_number_in_a_query(server: ServerProcess, queue: str, number: str) -> None:
    form = f"Action=ReceiveMessage&QueueUrl={queue}&MaxNumberOfMessages={number}".replace("+", "%2B")
    status, code, _ = call_query(server.url, form.encode())
    assert (status, code) == (400, "InvalidParameterValue")


def test_a_list_as_a_batch_entry_id(server: ServerProcess, queue: str) -> None:
    entries = [{"Id": ["a"], "MessageBody": "x"}]
    status, code, _ = call_json(server.url, "SendMessageBatch", {"QueueUrl": queue, "Entries": entries})
    assert (status, code) == (400, "InvalidBatchEntryId")


def test_a_string_value_that_is_not_a_string(server: ServerProcess, queue: str) -> None:
    attributes = {"a": {"DataType": "String", "StringValue": 5}}
    status, code, _ = call_json(
        server.url, "SendMessage", {"QueueUrl": queue, "MessageBody": "x", "MessageAttributes": attributes}
    )
    assert (status, code) == (400, "InvalidParameterValue")


def test_a_trace_header_that_is_not_a_string(server: ServerProcess, queue: str) -> None:
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": ["Root=1"]}}
    status, code, _ = call_json(
        server.url, "SendMessage", {"QueueUrl": queue, "MessageBody": "x", "MessageSystemAttributes": system}
    )
    assert (status, code) == (400, "InvalidParameterValue")


def test_a_malformed_queue_url_in_json(server: ServerProcess) -> None:
    status, code, _ = call_json(server.url, "SendMessage", {"QueueUrl": "http://[", "MessageBody": "x"})
    assert (status, code) == (400, "InvalidAddress")


def test_a_malformed_queue_url_in_a_query(server: ServerProcess) -> None:
    status, code, _ = call_query(server.url, b"Action=PurgeQueue&QueueUrl=http%3A%2F%2F%5B%3A%3A1%2Fq")
    assert (status, code) == (400, "InvalidAddress")


def test_a_content_length_that_is_not_a_number(server: ServerProcess) -> None:
    parts = urlsplit(server.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        # \xb2 is "²" in Latin-1: str.isdigit() says yes, int() says no.
        conn.sendall(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n"
            b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: \xb2\r\n\r\n{}"
        )
        answer = conn.recv(65_536)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body)["__type"].endswith("#MalformedHttpRequest")


def test_invalid_utf8_in_a_query_is_refused_not_replaced(server: ServerProcess, queue: str) -> None:
    status, code, _ = call_query(
        server.url, f"Action=SendMessage&QueueUrl={queue}&MessageBody=%FF%FE".encode()
    )
    assert (status, code) == (400, "MalformedQueryString")
    assert "Messages" not in client(server.url).receive_message(QueueUrl=queue)


def test_error_bodies_keep_internals_to_the_log(tmp_path: Path) -> None:
    db = tmp_path / "secret-name.db"
    with ServerProcess(db) as running:
        sqs = client(running.url)
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(5)])
    # Damage the page that holds the messages (the file's header and catalog stay intact).
    with sqlite3.connect(db) as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'durableq_messages'"
        ).fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with open(db, "r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xa5" * page_size)
    running = ServerProcess(db)
    try:
        status, headers, body = post(
            running.url,
            json.dumps({"QueueUrl": "q", "MaxNumberOfMessages": 10}).encode(),
            {"X-Amz-Target": "AmazonSQS.ReceiveMessage", "Content-Type": JSON},
        )
    finally:
        log = running.stop()
    assert status == 500 and json.loads(body)["__type"].endswith("#InternalFailure")
    assert headers["x-amzn-query-error"] == "InternalError;Receiver"
    for secret in (b"secret-name", str(tmp_path).encode(), b"malformed", b"sqlite", b"Traceback"):
        assert secret not in body
    assert "secret-name.db" in log and "malformed" in log  # the operator's log has the details


def test_the_server_log_has_no_traceback_for_client_mistakes(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db") as running:
        client(running.url).create_queue(QueueName="q")
        for number in NUMBERS.values():
            call_json(running.url, "ReceiveMessage", {"QueueUrl": "q", "WaitTimeSeconds": number})
        stderr = running.stop()
    assert "Traceback" not in stderr


def test_a_control_character_in_an_attribute_name_still_gets_well_formed_xml(
    server: ServerProcess, queue: str
) -> None:
    """SQS's wording of the error repeats the name; XML 1.0 cannot hold U+001F (found by test_fuzz)."""
    form = f"Action=SetQueueAttributes&QueueUrl={queue}&Attribute.1.Name=%1F&Attribute.1.Value=1"
    status, code, body = call_query(server.url, form.encode())
    assert (status, code) == (400, "InvalidAttributeName")
    assert ElementTree.fromstring(body).find(".//{*}Message").text == "Unknown Attribute ?."  # type: ignore[union-attr]
