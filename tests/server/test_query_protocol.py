"""The query protocol of older SDKs, driven with raw form posts and checked in the XML."""

from __future__ import annotations

import base64
import hashlib
import urllib.error
import urllib.parse
import urllib.request
from typing import Any
from xml.etree import ElementTree

from .conftest import ACCOUNT, REGION, ServerProcess

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"


def query(url: str, action: str, method: str = "POST", **params: Any) -> tuple[int, ElementTree.Element]:
    """Post ``Action=...`` with the given parameters (dots spelled as ``__``); the status and the XML."""
    form = urllib.parse.urlencode(
        {
            "Action": action,
            "Version": "2012-11-05",
            **{k.replace("__", "."): str(v) for k, v in params.items()},
        }
    )
    if method == "GET":
        request = urllib.request.Request(f"{url}?{form}")
    else:
        request = urllib.request.Request(
            url,
            data=form.encode(),
            method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, ElementTree.fromstring(response.read())
    except urllib.error.HTTPError as error:
        return error.code, ElementTree.fromstring(error.read())


def texts(root: ElementTree.Element, path: str) -> list[str]:
    qualified = "/".join(part if part in (".", "") else NS + part for part in path.split("/"))
    return [element.text or "" for element in root.iterfind(qualified)]


def text(root: ElementTree.Element, path: str) -> str:
    (found,) = texts(root, path)
    return found


def pairs(root: ElementTree.Element, element: str, key: str = "Name") -> dict[str, str]:
    return {e.findtext(f"{NS}{key}"): e.findtext(f"{NS}Value") for e in root.iter(f"{NS}{element}")}  # type: ignore[misc]


def ok(result: tuple[int, ElementTree.Element], action: str) -> ElementTree.Element:
    status, root = result
    assert status == 200, ElementTree.tostring(root)
    assert root.tag == f"{NS}{action}Response" and texts(root, ".//RequestId")
    return root


def test_queue_actions(server: ServerProcess) -> None:
    url = server.url
    created = ok(
        query(
            url,
            "CreateQueue",
            QueueName="qp",
            Attribute__1__Name="VisibilityTimeout",
            Attribute__1__Value="40",
            Tag__1__Key="team",
            Tag__1__Value="ops",
        ),
        "CreateQueue",
    )
    queue_url = text(created, ".//CreateQueueResult/QueueUrl")
    assert queue_url == f"{url}/{ACCOUNT}/qp"
    assert text(ok(query(url, "GetQueueUrl", QueueName="qp"), "GetQueueUrl"), ".//QueueUrl") == queue_url
    ok(query(url, "CreateQueue", QueueName="qp-2"), "CreateQueue")
    first = ok(query(url, "ListQueues", QueueNamePrefix="qp", MaxResults=1), "ListQueues")
    assert texts(first, ".//ListQueuesResult/QueueUrl") == [queue_url]
    rest = ok(
        query(
            url,
            "ListQueues",
            method="GET",
            QueueNamePrefix="qp",
            MaxResults=1,
            NextToken=text(first, ".//NextToken"),
        ),
        "ListQueues",
    )
    assert texts(rest, ".//QueueUrl") == [f"{url}/{ACCOUNT}/qp-2"]
    ok(
        query(
            url,
            "SetQueueAttributes",
            QueueUrl=queue_url,
            Attribute__1__Name="DelaySeconds",
            Attribute__1__Value="3",
        ),
        "SetQueueAttributes",
    )
    attributes = pairs(
        ok(
            query(url, "GetQueueAttributes", QueueUrl=queue_url, AttributeName__1="All"), "GetQueueAttributes"
        ),
        "Attribute",
    )
    assert attributes["VisibilityTimeout"] == "40" and attributes["DelaySeconds"] == "3"
    assert attributes["QueueArn"] == f"arn:aws:sqs:{REGION}:{ACCOUNT}:qp"
    ok(query(url, "TagQueue", QueueUrl=queue_url, Tag__1__Key="env", Tag__1__Value="dev"), "TagQueue")
    ok(query(url, "UntagQueue", QueueUrl=queue_url, TagKey__1="team"), "UntagQueue")
    assert pairs(ok(query(url, "ListQueueTags", QueueUrl=queue_url), "ListQueueTags"), "Tag", "Key") == {
        "env": "dev"
    }
    ok(
        query(
            url,
            "AddPermission",
            QueueUrl=queue_url,
            Label="l",
            AWSAccountId__1="111122223333",
            ActionName__1="SendMessage",
        ),
        "AddPermission",
    )
    policy = pairs(
        ok(
            query(url, "GetQueueAttributes", QueueUrl=queue_url, AttributeName__1="Policy"),
            "GetQueueAttributes",
        ),
        "Attribute",
    )["Policy"]
    assert '"SQS:SendMessage"' in policy
    ok(query(url, "RemovePermission", QueueUrl=queue_url, Label="l"), "RemovePermission")
    ok(query(url, "PurgeQueue", QueueUrl=queue_url), "PurgeQueue")
    ok(query(url, "DeleteQueue", QueueUrl=f"{url}/{ACCOUNT}/qp-2"), "DeleteQueue")


def test_message_actions(server: ServerProcess) -> None:
    url = server.url
    queue_url = text(ok(query(url, "CreateQueue", QueueName="qm"), "CreateQueue"), ".//QueueUrl")
    body = "line one\r\nline <two> & three"
    sent = ok(
        query(
            url,
            "SendMessage",
            QueueUrl=queue_url,
            MessageBody=body,
            MessageAttribute__1__Name="kind",
            MessageAttribute__1__Value__DataType="String",
            MessageAttribute__1__Value__StringValue="report",
            MessageAttribute__2__Name="raw",
            MessageAttribute__2__Value__DataType="Binary",
            MessageAttribute__2__Value__BinaryValue=base64.b64encode(b"\x00\xff").decode(),
            MessageSystemAttribute__1__Name="AWSTraceHeader",
            MessageSystemAttribute__1__Value__DataType="String",
            MessageSystemAttribute__1__Value__StringValue="Root=1-abc",
        ),
        "SendMessage",
    )
    assert text(sent, ".//MD5OfMessageBody") == hashlib.md5(body.encode()).hexdigest()
    assert texts(sent, ".//MD5OfMessageAttributes") and texts(sent, ".//MD5OfMessageSystemAttributes")
    batch = ok(
        query(
            url,
            "SendMessageBatch",
            QueueUrl=queue_url,
            SendMessageBatchRequestEntry__1__Id="a",
            SendMessageBatchRequestEntry__1__MessageBody="second",
            SendMessageBatchRequestEntry__2__Id="b",
            SendMessageBatchRequestEntry__2__MessageBody="\x07",
        ),
        "SendMessageBatch",
    )
    assert texts(batch, ".//SendMessageBatchResultEntry/Id") == ["a"]
    assert texts(batch, ".//BatchResultErrorEntry/Code") == ["InvalidMessageContents"]
    assert texts(batch, ".//BatchResultErrorEntry/SenderFault") == ["true"]
    received = ok(
        query(
            url,
            "ReceiveMessage",
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            AttributeName__1="All",
            MessageAttributeName__1="All",
        ),
        "ReceiveMessage",
    )
    messages = list(received.iter(f"{NS}Message"))
    assert [m.findtext(f"{NS}Body") for m in messages] == [body, "second"]  # the \r survived the XML
    first = messages[0]
    assert pairs(first, "Attribute")["AWSTraceHeader"] == "Root=1-abc"
    kinds = {
        a.findtext(f"{NS}Name"): (
            a.findtext(f"{NS}Value/{NS}DataType"),
            a.findtext(f"{NS}Value/{NS}StringValue") or a.findtext(f"{NS}Value/{NS}BinaryValue"),
        )
        for a in first.iter(f"{NS}MessageAttribute")
    }
    assert kinds == {"kind": ("String", "report"), "raw": ("Binary", base64.b64encode(b"\x00\xff").decode())}
    handles = [m.findtext(f"{NS}ReceiptHandle") for m in messages]
    ok(
        query(
            url, "ChangeMessageVisibility", QueueUrl=queue_url, ReceiptHandle=handles[0], VisibilityTimeout=90
        ),
        "ChangeMessageVisibility",
    )
    changed = ok(
        query(
            url,
            "ChangeMessageVisibilityBatch",
            QueueUrl=queue_url,
            ChangeMessageVisibilityBatchRequestEntry__1__Id="x",
            ChangeMessageVisibilityBatchRequestEntry__1__ReceiptHandle=handles[1],
            ChangeMessageVisibilityBatchRequestEntry__1__VisibilityTimeout=90,
        ),
        "ChangeMessageVisibilityBatch",
    )
    assert texts(changed, ".//ChangeMessageVisibilityBatchResultEntry/Id") == ["x"]
    ok(query(url, "DeleteMessage", QueueUrl=queue_url, ReceiptHandle=handles[0]), "DeleteMessage")
    deleted = ok(
        query(
            url,
            "DeleteMessageBatch",
            QueueUrl=queue_url,
            DeleteMessageBatchRequestEntry__1__Id="y",
            DeleteMessageBatchRequestEntry__1__ReceiptHandle=handles[1],
        ),
        "DeleteMessageBatch",
    )
    assert texts(deleted, ".//DeleteMessageBatchResultEntry/Id") == ["y"]
    assert not list(
        ok(query(url, "ReceiveMessage", QueueUrl=queue_url), "ReceiveMessage").iter(f"{NS}Message")
    )


def test_dead_letter_and_move_task_actions(server: ServerProcess) -> None:
    url = server.url
    dlq_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:qd-dlq"
    dlq = text(ok(query(url, "CreateQueue", QueueName="qd-dlq"), "CreateQueue"), ".//QueueUrl")
    source = text(
        ok(
            query(
                url,
                "CreateQueue",
                QueueName="qd",
                Attribute__1__Name="RedrivePolicy",
                Attribute__1__Value=f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"2"}}',
            ),
            "CreateQueue",
        ),
        ".//QueueUrl",
    )
    sources = ok(query(url, "ListDeadLetterSourceQueues", QueueUrl=dlq), "ListDeadLetterSourceQueues")
    assert texts(sources, ".//QueueUrl") == [source]
    ok(query(url, "SendMessage", QueueUrl=dlq, MessageBody="x"), "SendMessage")
    started = ok(
        query(
            url,
            "StartMessageMoveTask",
            SourceArn=dlq_arn,
            DestinationArn=f"{dlq_arn[:-4]}",
            MaxNumberOfMessagesPerSecond=1,
        ),
        "StartMessageMoveTask",
    )
    handle = text(started, ".//TaskHandle")
    listed = ok(query(url, "ListMessageMoveTasks", SourceArn=dlq_arn, MaxResults=10), "ListMessageMoveTasks")
    assert text(listed, ".//ListMessageMoveTasksResultEntry/SourceArn") == dlq_arn
    status, root = query(url, "CancelMessageMoveTask", TaskHandle=handle)
    # The task may have finished its one message already; either answer is well formed.
    assert (status, root.tag) in ((200, f"{NS}CancelMessageMoveTaskResponse"), (400, f"{NS}ErrorResponse"))


def test_errors_are_sqs_error_responses(server: ServerProcess) -> None:
    status, root = query(server.url, "GetQueueUrl", QueueName="nowhere")
    assert (status, root.tag) == (400, f"{NS}ErrorResponse")
    assert text(root, "./Error/Code") == "AWS.SimpleQueueService.NonExistentQueue"
    assert text(root, "./Error/Type") == "Sender" and texts(root, "./RequestId")
    status, root = query(server.url, "Explode")
    assert (status, text(root, "./Error/Code")) == (400, "InvalidAction")
    status, root = query(server.url, "GetQueueUrl")
    assert (status, text(root, "./Error/Code")) == (400, "MissingParameter")
    status, root = query(
        server.url, "CreateQueue", QueueName="qe", Attribute__1__Name="Colour", Attribute__1__Value="red"
    )
    assert (status, text(root, "./Error/Code")) == (400, "InvalidAttributeName")


def test_older_sdks_post_to_the_queue_url(server: ServerProcess) -> None:
    queue_url = text(ok(query(server.url, "CreateQueue", QueueName="qu"), "CreateQueue"), ".//QueueUrl")
    ok(query(queue_url, "SendMessage", MessageBody="to the path"), "SendMessage")
    received = ok(query(queue_url, "ReceiveMessage"), "ReceiveMessage")
    assert text(received, ".//Body") == "to the path"
