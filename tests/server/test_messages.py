"""Message actions through boto3: send, receive (filters, digests), delete, visibility, batches, FIFO."""

from __future__ import annotations

import hashlib
import threading
import time
from http.client import HTTPConnection
from typing import Any

import pytest

from tests.conftest import threads_inside, until

from .conftest import ACCOUNT, REGION, client, error_of

ATTRIBUTES = {
    "n": {"DataType": "Number", "StringValue": "1"},
    "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    "s": {"DataType": "String.label", "StringValue": "héllo"},
}
# MD5OfMessageAttributes of subsets of ATTRIBUTES, and of the trace header below, as computed
# by an independent implementation of the SQS algorithm (moto's), not by durableq.
DIGESTS = {
    ("b", "n", "s"): "0d794054f7473e5d8b22f57e278a7aa5",
    ("n", "s"): "6a67ee730aedb0617d331d2423311949",
    ("s",): "21b5668a2650898e99dbc1f97124c2a0",
}
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793"
TRACE_DIGEST = "62a56dd927315f2b2e12832b84617ea5"


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_send_and_receive_with_attributes_and_digests(sqs: Any, queue_url: str) -> None:
    body = "héllo wörld\r\n"
    sent = sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=body,
        MessageAttributes=ATTRIBUTES,
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}},
    )
    assert sent["MD5OfMessageBody"] == md5(body)
    assert sent["MD5OfMessageAttributes"] == DIGESTS[("b", "n", "s")]
    assert sent["MD5OfMessageSystemAttributes"] == TRACE_DIGEST
    assert "SequenceNumber" not in sent
    (message,) = sqs.receive_message(
        QueueUrl=queue_url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
    )["Messages"]
    assert (message["MessageId"], message["Body"], message["MD5OfBody"]) == (
        sent["MessageId"],
        body,
        md5(body),
    )
    assert message["MessageAttributes"] == ATTRIBUTES
    assert message["MD5OfMessageAttributes"] == DIGESTS[("b", "n", "s")]
    system = message["Attributes"]
    assert system["AWSTraceHeader"] == TRACE and system["ApproximateReceiveCount"] == "1"
    assert system["SenderId"] == ACCOUNT
    assert int(system["SentTimestamp"]) <= int(system["ApproximateFirstReceiveTimestamp"])


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([], ()),
        (["All"], ("b", "n", "s")),
        ([".*"], ("b", "n", "s")),
        (["n", "s"], ("n", "s")),
        (["s.*"], ("s",)),  # "prefix.*" selects names starting with the prefix ("Custom.*" -> "Custom1")
        (["x.*", "t.*"], ()),
        (["String.*", "s"], ("s",)),
    ],
)
def test_message_attribute_filters(
    sqs: Any, queue_url: str, names: list[str], expected: tuple[str, ...]
) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageAttributes=ATTRIBUTES)
    (message,) = sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=names)["Messages"]
    assert tuple(sorted(message.get("MessageAttributes", {}))) == expected
    assert message.get("MD5OfMessageAttributes") == DIGESTS.get(expected)


def test_prefix_filters_and_system_attribute_filters(sqs: Any, queue_url: str) -> None:
    attributes = {
        "order.id": {"DataType": "String", "StringValue": "7"},
        "order.total": {"DataType": "Number", "StringValue": "9.5"},
        "other": {"DataType": "String", "StringValue": "no"},
    }
    sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageAttributes=attributes)
    (message,) = sqs.receive_message(
        QueueUrl=queue_url,
        MessageAttributeNames=["order.*"],
        AttributeNames=["SentTimestamp"],
        MessageSystemAttributeNames=["ApproximateReceiveCount"],
    )["Messages"]
    assert sorted(message["MessageAttributes"]) == ["order.id", "order.total"]
    assert sorted(message["Attributes"]) == ["ApproximateReceiveCount", "SentTimestamp"]
    sqs.change_message_visibility(
        QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    (again,) = sqs.receive_message(QueueUrl=queue_url, AttributeNames=["QueueArn", "Colour"])["Messages"]
    assert "Attributes" not in again  # names that are no message system attribute are ignored, as SQS does


def test_send_errors_come_from_the_library(sqs: Any, queue_url: str) -> None:
    with pytest.raises(sqs.exceptions.InvalidMessageContents):
        sqs.send_message(QueueUrl=queue_url, MessageBody="bell \x07")
    with pytest.raises(sqs.exceptions.ClientError) as too_big:
        sqs.send_message(QueueUrl=queue_url, MessageBody="x" * 1_048_577)
    assert error_of(too_big)[0] == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ClientError) as reserved:
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody="x",
            MessageAttributes={"AWS.x": {"DataType": "String", "StringValue": "v"}},
        )
    assert error_of(reserved)[0] == "InvalidParameterValue"


def test_batches_report_failures_per_entry(sqs: Any, queue_url: str) -> None:
    sent = sqs.send_message_batch(
        QueueUrl=queue_url,
        Entries=[
            {"Id": "ok", "MessageBody": "fine", "MessageAttributes": {"s": ATTRIBUTES["s"]}},
            {"Id": "bad", "MessageBody": "bell \x07"},
            {"Id": "late", "MessageBody": "later", "DelaySeconds": 901},
        ],
    )
    assert sent["ResponseMetadata"]["HTTPStatusCode"] == 200
    (ok,) = sent["Successful"]
    assert (ok["Id"], ok["MD5OfMessageBody"], ok["MD5OfMessageAttributes"]) == (
        "ok",
        md5("fine"),
        DIGESTS[("s",)],
    )
    failed = {f["Id"]: (f["Code"], f["SenderFault"]) for f in sent["Failed"]}
    assert failed == {"bad": ("InvalidMessageContents", True), "late": ("InvalidParameterValue", True)}
    (message,) = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=60)["Messages"]
    changed = sqs.change_message_visibility_batch(
        QueueUrl=queue_url,
        Entries=[
            {"Id": "a", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "b", "ReceiptHandle": "garbage", "VisibilityTimeout": 0},
        ],
    )
    assert [s["Id"] for s in changed["Successful"]] == ["a"]
    assert [(f["Id"], f["Code"]) for f in changed["Failed"]] == [("b", "ReceiptHandleIsInvalid")]
    (again,) = sqs.receive_message(QueueUrl=queue_url)["Messages"]  # visible again at once
    deleted = sqs.delete_message_batch(
        QueueUrl=queue_url,
        Entries=[
            {"Id": "a", "ReceiptHandle": again["ReceiptHandle"]},
            {"Id": "b", "ReceiptHandle": "garbage"},
        ],
    )
    assert [s["Id"] for s in deleted["Successful"]] == ["a"] and deleted["Failed"][0]["Id"] == "b"


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([], "EmptyBatchRequest"),
        ([{"Id": str(i), "MessageBody": "x"} for i in range(11)], "TooManyEntriesInBatchRequest"),
        ([{"Id": "a", "MessageBody": "x"}] * 2, "BatchEntryIdsNotDistinct"),
        ([{"Id": "no spaces", "MessageBody": "x"}], "InvalidBatchEntryId"),
        ([{"Id": str(i), "MessageBody": "x" * 200_000} for i in range(6)], "BatchRequestTooLong"),
    ],
)
def test_whole_batch_errors(sqs: Any, queue_url: str, entries: list[dict[str, str]], error: str) -> None:
    with pytest.raises(getattr(sqs.exceptions, error)) as refused:
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    assert error_of(refused) == (f"AWS.SimpleQueueService.{error}", error, 400)


def test_delete_change_visibility_and_receipt_errors(sqs: Any, queue_url: str) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="x")
    (first,) = sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=0)["Messages"]
    (second,) = sqs.receive_message(QueueUrl=queue_url, AttributeNames=["ApproximateReceiveCount"])[
        "Messages"
    ]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    with pytest.raises(sqs.exceptions.MessageNotInflight) as stale:
        sqs.change_message_visibility(
            QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=5
        )
    assert error_of(stale) == ("AWS.SimpleQueueService.MessageNotInflight", "MessageNotInflight", 400)
    with pytest.raises(sqs.exceptions.ClientError) as too_long:
        sqs.change_message_visibility(
            QueueUrl=queue_url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=43_201
        )
    assert error_of(too_long)[0] == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as invalid:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle="not-a-handle")
    assert error_of(invalid) == ("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"])  # any handle, standard queue
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)


def test_a_standard_queue_takes_a_message_group_id(sqs: Any, queue_url: str) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="tenant a's", MessageGroupId="tenant-a")
    sqs.send_message_batch(
        QueueUrl=queue_url, Entries=[{"Id": "1", "MessageBody": "tenant b's", "MessageGroupId": "tenant-b"}]
    )
    received = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    assert [(m["Body"], m["Attributes"]) for m in received] == [
        ("tenant a's", {"MessageGroupId": "tenant-a"}),
        ("tenant b's", {"MessageGroupId": "tenant-b"}),
    ]
    with pytest.raises(sqs.exceptions.ClientError) as refused:  # deduplication stays FIFO's
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageDeduplicationId="d")
    assert error_of(refused)[0] == "InvalidParameterValue"


def test_a_noisy_tenant_yields_to_a_quiet_one(sqs: Any, queue_url: str) -> None:
    # Fair queues: 31 of the noisy tenant's messages in flight (at least 30, and more than a tenth).
    for start in range(0, 40, 10):
        entries = [
            {"Id": str(i), "MessageBody": f"n{i}", "MessageGroupId": "noisy"}
            for i in range(start, start + 10)
        ]
        assert not sqs.send_message_batch(QueueUrl=queue_url, Entries=entries).get("Failed")
    held = 0
    while held < 31:
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=min(10, 31 - held), VisibilityTimeout=3600
        )
        held += len(got["Messages"])
    sqs.send_message(QueueUrl=queue_url, MessageBody="q0", MessageGroupId="quiet")
    received = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=3, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in received] == [
        ("q0", "quiet"),
        ("n31", "noisy"),
        ("n32", "noisy"),
    ]


def test_fifo_order_deduplication_and_receive_attempts(sqs: Any, fifo_url: str) -> None:
    numbers = []
    for body, group in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        sent = sqs.send_message(
            QueueUrl=fifo_url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=body
        )
        numbers.append(sent["SequenceNumber"])
    assert numbers == sorted(numbers, key=int)
    duplicate = sqs.send_message(
        QueueUrl=fifo_url, MessageBody="a1", MessageGroupId="a", MessageDeduplicationId="a1"
    )
    assert duplicate["SequenceNumber"] == numbers[0]
    with pytest.raises(sqs.exceptions.ClientError) as no_group:
        sqs.send_message(QueueUrl=fifo_url, MessageBody="x", MessageDeduplicationId="x")
    assert error_of(no_group)[0] == "MissingParameter"
    first = sqs.receive_message(
        QueueUrl=fifo_url,
        MaxNumberOfMessages=10,
        ReceiveRequestAttemptId="try-1",
        MessageSystemAttributeNames=["MessageGroupId", "SequenceNumber", "MessageDeduplicationId"],
    )["Messages"]
    assert [m["Body"] for m in first] == ["a1", "a2", "b1"]
    assert first[0]["Attributes"] == {
        "MessageGroupId": "a",
        "SequenceNumber": numbers[0],
        "MessageDeduplicationId": "a1",
    }
    retried = sqs.receive_message(QueueUrl=fifo_url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1")
    assert [m["ReceiptHandle"] for m in retried["Messages"]] == [m["ReceiptHandle"] for m in first]
    c1 = {"Id": "x", "MessageBody": "c1", "MessageGroupId": "c", "MessageDeduplicationId": "c1"}
    with pytest.raises(sqs.exceptions.ClientError) as no_group:  # the whole request, as SQS
        sqs.send_message_batch(QueueUrl=fifo_url, Entries=[c1, {"Id": "y", "MessageBody": "c2"}])
    assert error_of(no_group) == ("MissingParameter", "MissingParameter", 400)
    assert (
        no_group.value.response["Error"]["Message"]
        == "The request must contain the parameter MessageGroupId."
    )
    batch = sqs.send_message_batch(
        QueueUrl=fifo_url, Entries=[c1, {**c1, "Id": "y", "MessageDeduplicationId": "c2", "DelaySeconds": 5}]
    )
    assert batch["Successful"][0]["SequenceNumber"] > numbers[-1]
    assert batch["Failed"] == [
        {
            "Id": "y",
            "SenderFault": True,
            "Code": "InvalidParameterValue",
            "Message": "Value 5 for parameter DelaySeconds is invalid. Reason: "
            "The request include parameter that is not valid for this queue type.",
        }
    ]


def test_dead_letters_and_message_move_tasks(sqs: Any, name: str) -> None:
    dlq_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}-dlq"
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    source = sqs.create_queue(
        QueueName=name,
        Attributes={"RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": 1}}'},
    )["QueueUrl"]
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    sqs.receive_message(QueueUrl=source, VisibilityTimeout=0)
    assert "Messages" not in sqs.receive_message(QueueUrl=source)  # moved instead of received again
    (dead,) = sqs.receive_message(
        QueueUrl=dlq, VisibilityTimeout=0, MessageSystemAttributeNames=["DeadLetterQueueSourceArn"]
    )["Messages"]
    assert dead["Attributes"] == {"DeadLetterQueueSourceArn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"}
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=10)["TaskHandle"]
    deadline = time.monotonic() + 20
    while True:
        (task,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if task["Status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert task["Status"] == "COMPLETED" and task["ApproximateNumberOfMessagesMoved"] == 1
    assert task["SourceArn"] == dlq_arn and task["MaxNumberOfMessagesPerSecond"] == 10
    assert sqs.receive_message(QueueUrl=source)["Messages"][0]["Body"] == "poison"
    with pytest.raises(sqs.exceptions.ClientError) as done:
        sqs.cancel_message_move_task(TaskHandle=handle)  # only a running task can be cancelled
    assert error_of(done)[0] == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ResourceNotFoundException) as unknown:
        sqs.cancel_message_move_task(TaskHandle="no-such-task")
    assert error_of(unknown) == ("ResourceNotFoundException", "ResourceNotFoundException", 404)


def test_cancel_a_running_move_task(sqs: Any, name: str) -> None:
    dlq_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.create_queue(QueueName=f"{name}-to")
    policy = f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": 1}}'
    sqs.create_queue(QueueName=f"{name}-src", Attributes={"RedrivePolicy": policy})  # a DLQ's source
    for _ in range(3):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(10)])
    sqs.start_message_move_task(
        SourceArn=dlq_arn, DestinationArn=f"{dlq_arn}-to", MaxNumberOfMessagesPerSecond=1
    )
    (task,) = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
    assert task["Status"] == "RUNNING" and task["ApproximateNumberOfMessagesToMove"] == 30
    sqs.cancel_message_move_task(TaskHandle=task["TaskHandle"])
    deadline = time.monotonic() + 30
    while (task := sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0])["Status"] == "CANCELLING":
        assert time.monotonic() < deadline, "the cancelled task never stopped"
        time.sleep(0.05)
    # It stopped before the end (30 messages at 1 a second), and what it moved stayed moved: none lost.
    moved = task["ApproximateNumberOfMessagesMoved"]
    assert task["Status"] == "CANCELLED" and moved < 30
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    arrived = sqs.get_queue_attributes(
        QueueUrl=sqs.get_queue_url(QueueName=f"{name}-to")["QueueUrl"],
        AttributeNames=["ApproximateNumberOfMessages"],
    )
    assert int(arrived["Attributes"]["ApproximateNumberOfMessages"]) == moved
    assert int(left["Attributes"]["ApproximateNumberOfMessages"]) == 30 - moved


def test_a_long_poll_holds_up_no_other_request(sqs: Any, server: Any, queue_url: str) -> None:
    waiting = client(server.url)
    received: list[Any] = []
    poll = threading.Thread(
        target=lambda: received.extend(
            waiting.receive_message(QueueUrl=queue_url, WaitTimeSeconds=20)["Messages"]
        )
    )
    poll.start()
    # The poll's request is sent once its thread waits for the answer (the server is another process).
    until(lambda: poll.ident in threads_inside(HTTPConnection.getresponse.__code__), "the poll is sent")
    for _ in range(5):  # other requests are answered while the poll waits
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert poll.is_alive(), "the poll ended before the other requests were answered"
    sqs.send_message(QueueUrl=queue_url, MessageBody="wake up")
    poll.join(30)
    assert [m["Body"] for m in received] == ["wake up"]
