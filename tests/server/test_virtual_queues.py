"""Virtual queues on the endpoint: ``QUEUE_URL#NAME`` (the convention of AWS's temporary queue
client) names the virtual queue NAME of the queue at QUEUE_URL, for boto3 as for any SDK."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import error_of


def test_a_virtual_queue_url_sends_and_receives_only_its_own_messages(sqs: Any, queue_url: str) -> None:
    alpha, beta = f"{queue_url}#alpha", f"{queue_url}#beta"
    sqs.send_message(QueueUrl=alpha, MessageBody="for alpha")
    sqs.send_message_batch(QueueUrl=beta, Entries=[{"Id": "1", "MessageBody": "for beta"}])
    sqs.send_message(QueueUrl=queue_url, MessageBody="for the host")
    bodies = {}
    for url in (alpha, beta, queue_url):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        bodies[url] = [m["Body"] for m in messages]
        for m in messages:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=5)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert bodies == {alpha: ["for alpha"], beta: ["for beta"], queue_url: ["for the host"]}
    assert sqs.receive_message(QueueUrl=alpha, WaitTimeSeconds=1).get("Messages", []) == []


def test_a_virtual_queue_has_no_attributes_of_its_own(sqs: Any, queue_url: str) -> None:
    with pytest.raises(Exception) as excinfo:
        sqs.get_queue_attributes(QueueUrl=f"{queue_url}#alpha", AttributeNames=["All"])
    code, _, status = error_of(excinfo)
    assert status == 400 and code in {"UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation"}


def test_a_bad_virtual_name_or_host_is_a_client_error(sqs: Any, queue_url: str) -> None:
    for url in (f"{queue_url}#bad name", f"{queue_url.rsplit('/', 1)[0]}/nope#alpha"):
        with pytest.raises(Exception) as excinfo:
            sqs.send_message(QueueUrl=url, MessageBody="x")
        code, _, status = error_of(excinfo)
        assert (status, code) == (400, "AWS.SimpleQueueService.NonExistentQueue"), url
