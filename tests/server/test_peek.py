"""The developer's peek, ``GET /_aws/sqs/messages``: LocalStack's shape; nothing about a message changes."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import durableq
from durableq.server.dispatch import Dispatcher
from durableq.server.errors import WireError
from durableq.server.peek import answer
from durableq.server.wire import Headers, Request

from .conftest import KEY_ID, REGION, SECRET, ServerProcess

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"


def peek(server_url: str, queue_url: str, headers: dict[str, str] | None = None, **flags: str) -> Any:
    query = urllib.parse.urlencode({"QueueUrl": queue_url, **flags})
    request = urllib.request.Request(f"{server_url}/_aws/sqs/messages?{query}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_peek_shows_messages_as_localstack_does_and_changes_nothing(
    sqs: Any, queue_url: str, server: Any
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="in flight")
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody="visible",
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "k"}},
        MessageGroupId="tenant-a",
    )
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=600)
    [held] = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=600)["Messages"]
    assert held["Body"] == "in flight"

    status, body = peek(server.url, queue_url, {"Accept": "application/json"})
    assert status == 200
    [only] = json.loads(body)["ReceiveMessageResponse"]["ReceiveMessageResult"]["Message"]
    assert only["Body"] == "visible" and only["ReceiptHandle"] == "SQS/BACKDOOR/ACCESS"
    attributes = {a["Name"]: a["Value"] for a in only["Attribute"]}
    assert attributes["IsVisible"] == "true" and attributes["IsDelayed"] == "false"
    assert attributes["ApproximateReceiveCount"] == "0" and attributes["MessageGroupId"] == "tenant-a"
    assert only["MessageAttribute"] == [{"Name": "kind", "Value": {"StringValue": "k", "DataType": "String"}}]

    status, body = peek(server.url, queue_url, ShowInvisible="true", ShowDelayed="true")  # XML by default
    assert status == 200
    shown = ElementTree.fromstring(body).findall(f"{NS}ReceiveMessageResult/{NS}Message")
    states = {
        m.findtext(f"{NS}Body"): {
            a.findtext(f"{NS}Name"): a.findtext(f"{NS}Value") for a in m.findall(f"{NS}Attribute")
        }
        for m in shown
    }
    assert sorted(states) == ["delayed", "in flight", "visible"]
    assert (states["in flight"]["IsVisible"], states["in flight"]["ApproximateReceiveCount"]) == (
        "false",
        "1",
    )
    assert (states["delayed"]["IsVisible"], states["delayed"]["IsDelayed"]) == ("false", "true")

    # Nothing changed: the held message stays in flight, the visible one was never received.
    [received] = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert received["Body"] == "visible" and received["Attributes"]["ApproximateReceiveCount"] == "1"
    with pytest.raises(sqs.exceptions.ClientError):  # the peek's handle is no receipt handle
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle="SQS/BACKDOOR/ACCESS")


def test_peek_of_a_missing_queue_or_without_a_url(server: Any) -> None:
    status, body = peek(server.url, f"{server.url}/000000000000/no-such-queue")
    assert status == 400 and b"AWS.SimpleQueueService.NonExistentQueue" in body
    status, body = peek(server.url, "")
    assert status == 400 and b"QueueUrl" in body


def _request(query: str, headers: dict[str, str] | None = None) -> Request:
    return Request("GET", "/_aws/sqs/messages", query, Headers((headers or {}).items()), b"")


def test_peek_answers_loopback_clients_only_without_credentials(tmp_path: Path) -> None:
    with durableq.open(tmp_path / "q.db") as broker:
        broker.create_queue("jobs").send("secret")
        dispatcher = Dispatcher(
            broker, region=REGION, account_id="0", credentials=None, scheme="http", default_host="h"
        )
        assert b"secret" in answer(dispatcher, _request("QueueUrl=jobs"), "127.0.0.1").body
        assert b"secret" in answer(dispatcher, _request("QueueUrl=jobs"), "::1").body
        for client in ("192.0.2.7", "2001:db8::1", None):
            with pytest.raises(WireError, match="loopback") as refused:
                answer(dispatcher, _request("QueueUrl=jobs"), client)
            assert refused.value.status == 403


def test_with_credentials_peek_needs_a_signature(tmp_path: Path) -> None:
    keys = tmp_path / "credentials"
    keys.write_text(f"{KEY_ID} {SECRET}\n")
    with ServerProcess(tmp_path / "queues.db", "--credentials", str(keys)) as server:
        url = f"{server.url}/_aws/sqs/messages?QueueUrl=jobs"
        status, body = peek(server.url, "jobs")
        assert status in (400, 403) and b"MissingAuthenticationToken" in body  # unsigned, even from loopback
        signed = AWSRequest(method="GET", url=url)
        SigV4Auth(Credentials(KEY_ID, SECRET), "sqs", REGION).add_auth(signed)
        prepared = signed.prepare()
        request = urllib.request.Request(prepared.url, headers=dict(prepared.headers), method="GET")
        try:
            urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as error:  # signed: it gets in, and finds no queue "jobs"
            assert b"NonExistentQueue" in error.read()
        else:
            raise AssertionError("a peek of a queue that does not exist answered 200")
