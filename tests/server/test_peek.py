"""The developer's peek, ``GET /_aws/sqs/messages``: LocalStack's shape; nothing about a message changes."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

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
