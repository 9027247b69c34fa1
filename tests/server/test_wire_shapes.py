"""The shape of answers as SQS gives them: result elements, required members, compact JSON, element order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import ACCOUNT, REGION, ServerProcess
from .test_query_protocol import NS, ok, query, text, texts


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("ReceiveMessage", {}),
        ("ListQueueTags", {}),
        ("GetQueueAttributes", {}),  # no AttributeName: no attribute
        ("ListDeadLetterSourceQueues", {}),
    ],
)
def test_empty_query_results_keep_their_result_element(
    server: ServerProcess, action: str, params: dict[str, Any]
) -> None:
    # Query-era botocore reads <ReceiveMessageResult> unconditionally (KeyError without it).
    queue_url = text(
        ok(query(server.url, "CreateQueue", QueueName=f"empty-{action}"), "CreateQueue"), ".//QueueUrl"
    )
    root = ok(query(server.url, action, QueueUrl=queue_url, **params), action)
    (result,) = root.iterfind(f"{NS}{action}Result")
    assert list(result) == []


def test_empty_list_queues_keeps_its_result_element(server: ServerProcess) -> None:
    root = ok(query(server.url, "ListQueues", QueueNamePrefix="no-such-prefix"), "ListQueues")
    assert [child.tag for child in root] == [f"{NS}ListQueuesResult", f"{NS}ResponseMetadata"]


def test_actions_without_output_have_no_result_element(server: ServerProcess) -> None:
    queue_url = text(
        ok(query(server.url, "CreateQueue", QueueName="no-output"), "CreateQueue"), ".//QueueUrl"
    )
    root = ok(query(server.url, "PurgeQueue", QueueUrl=queue_url), "PurgeQueue")
    assert [child.tag for child in root] == [f"{NS}ResponseMetadata"]


def test_an_empty_list_sent_as_a_bare_prefix_is_an_empty_list(server: ServerProcess) -> None:
    # botocore and the JavaScript SDK encode AttributeNames=[] as "AttributeName=".
    queue_url = text(
        ok(query(server.url, "CreateQueue", QueueName="bare", Attribute=""), "CreateQueue"), ".//QueueUrl"
    )
    ok(
        query(server.url, "SendMessage", QueueUrl=queue_url, MessageBody="m", MessageAttribute=""),
        "SendMessage",
    )
    received = ok(
        query(
            server.url,
            "ReceiveMessage",
            QueueUrl=queue_url,
            AttributeName="",
            MessageAttributeName="",
            MessageSystemAttributeName="",
        ),
        "ReceiveMessage",
    )
    assert texts(received, ".//Message/Body") == ["m"]
    assert not list(received.iter(f"{NS}Attribute"))
    attributes = ok(
        query(server.url, "GetQueueAttributes", QueueUrl=queue_url, AttributeName=""), "GetQueueAttributes"
    )
    assert not list(attributes.iter(f"{NS}Attribute"))
    status, root = query(server.url, "SendMessageBatch", QueueUrl=queue_url, Entries="")
    assert (status, text(root, "./Error/Code")) == (400, "AWS.SimpleQueueService.EmptyBatchRequest")
    # botocore names the member itself: AttributeNames=, Entries=.
    attributes = ok(
        query(server.url, "GetQueueAttributes", QueueUrl=queue_url, AttributeNames=""), "GetQueueAttributes"
    )
    assert not list(attributes.iter(f"{NS}Attribute"))


def test_message_attribute_values_come_before_their_data_type(server: ServerProcess) -> None:
    queue_url = text(ok(query(server.url, "CreateQueue", QueueName="order"), "CreateQueue"), ".//QueueUrl")
    sent = ok(
        query(
            server.url,
            "SendMessage",
            QueueUrl=queue_url,
            MessageBody="m",
            MessageAttribute__1__Name="a",
            MessageAttribute__1__Value__DataType="String",
            MessageAttribute__1__Value__StringValue="v",
        ),
        "SendMessage",
    )
    (result,) = sent.iterfind(f"{NS}SendMessageResult")
    assert [child.tag[len(NS) :] for child in result] == [
        "MD5OfMessageBody",
        "MD5OfMessageAttributes",
        "MessageId",
    ]
    received = ok(
        query(server.url, "ReceiveMessage", QueueUrl=queue_url, MessageAttributeName__1="All"),
        "ReceiveMessage",
    )
    (message,) = received.iter(f"{NS}Message")
    assert [child.tag[len(NS) :] for child in message] == [
        "MessageId",
        "ReceiptHandle",
        "MD5OfBody",
        "Body",
        "MD5OfMessageAttributes",
        "MessageAttribute",
    ]
    (value,) = message.iterfind(f"{NS}MessageAttribute/{NS}Value")
    assert [child.tag[len(NS) :] for child in value] == ["StringValue", "DataType"]


def test_json_dead_letter_sources_always_carry_queue_urls(sqs: Any, queue_url: str) -> None:
    assert sqs.list_dead_letter_source_queues(QueueUrl=queue_url)["queueUrls"] == []


def test_redrive_policies_come_back_as_compact_json(sqs: Any, name: str) -> None:
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}-dlq"
    policy = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}  # text, as many clients send it
    allow = {"redrivePermission": "byQueue", "sourceQueueArns": [f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"]}
    sqs.set_queue_attributes(QueueUrl=dlq_url, Attributes={"RedriveAllowPolicy": json.dumps(allow)})
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(policy)})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert got["RedrivePolicy"] == f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":3}}'
    got = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["RedriveAllowPolicy"])["Attributes"]
    assert got["RedriveAllowPolicy"] == json.dumps(allow, separators=(",", ":"))
