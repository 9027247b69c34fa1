"""Errors in SQS's own words and codes (durableq/server/wording.py), and whole-request errors where SQS
has them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .conftest import ACCOUNT, REGION, ServerProcess
from .test_query_protocol import query, text


def sqs_error(call: Callable[[], Any]) -> tuple[str, str]:
    """(Error.Code, Error.Message) of a call that must fail."""
    with pytest.raises(ClientError) as raised:
        call()
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


NO_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
NAME_RULE = "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"


def test_queue_errors(sqs: Any, server: ServerProcess) -> None:
    assert sqs_error(lambda: sqs.get_queue_url(QueueName="nowhere")) == NO_QUEUE
    assert sqs_error(lambda: sqs.send_message(QueueUrl="nowhere", MessageBody="x")) == NO_QUEUE
    # A URL whose path names no queue at all is a queue that does not exist, not a bad name.
    assert sqs_error(lambda: sqs.get_queue_attributes(QueueUrl="http://somewhere-else")) == NO_QUEUE
    for bad in ("", "/my/test", "p" * 81, "x.fifo"):
        assert sqs_error(lambda bad=bad: sqs.create_queue(QueueName=bad)) == (
            "InvalidParameterValue",
            NAME_RULE,
        )
    assert sqs_error(lambda: sqs.create_queue(QueueName="bad", Attributes={"Colour": "red"})) == (
        "InvalidAttributeName",
        "Unknown Attribute Colour.",
    )
    assert sqs_error(
        lambda: sqs.create_queue(QueueName="bad", Attributes={"MessageRetentionPeriod": "1"})
    ) == ("InvalidAttributeValue", "Invalid value for the parameter MessageRetentionPeriod.")
    sqs.create_queue(QueueName="w-exists", Attributes={"VisibilityTimeout": "10"})
    assert sqs_error(
        lambda: sqs.create_queue(QueueName="w-exists", Attributes={"VisibilityTimeout": "60"})
    ) == (
        "QueueAlreadyExists",
        "A queue already exists with the same name and a different value for attribute VisibilityTimeout",
    )
    # The query protocol keeps its own text for a missing queue.
    status, root = query(server.url, "GetQueueUrl", QueueName="nowhere")
    assert (status, text(root, "./Error/Message")) == (
        400,
        "The specified queue does not exist for this wsdl version.",
    )


def test_an_attribute_value_wrong_in_itself_is_worded_as_sqs_does(sqs: Any) -> None:
    """Whatever is wrong with it (not a number, not JSON, a permission SQS does not have)."""
    for name, value in (
        ("VisibilityTimeout", "soon"),
        ("Policy", "{not json"),
        ("RedriveAllowPolicy", '{"redrivePermission": "some"}'),
    ):
        assert sqs_error(
            lambda name=name, value=value: sqs.create_queue(QueueName="v", Attributes={name: value})
        ) == (
            "InvalidAttributeValue",
            f"Invalid value for the parameter {name}.",
        )


def test_message_errors(sqs: Any, queue_url: str) -> None:
    def send(**params: Any) -> tuple[str, str]:
        return sqs_error(lambda: sqs.send_message(QueueUrl=queue_url, **{"MessageBody": "x", **params}))

    assert send(MessageBody="y" * 1_048_577) == (
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
    )
    assert send(MessageBody="bell \x07") == (
        "InvalidMessageContents",
        "Invalid binary character '#x7' was found in the message body, the set of allowed characters is "
        "#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
    )
    assert send(MessageAttributes={"öther": {"DataType": "String", "StringValue": "v"}}) == (
        "InvalidParameterValue",
        "The message attribute name 'öther' is invalid. Attribute name can contain A-Z, a-z, 0-9, "
        "underscore (_), hyphen (-), and period (.) characters.",
    )
    assert send(MessageAttributes={"when": {"DataType": "Timestamp", "StringValue": "1"}}) == (
        "InvalidParameterValue",
        "The message attribute 'when' has an invalid message attribute type, the set of supported type "
        "prefixes is Binary, Number, and String.",
    )
    assert send(DelaySeconds=901) == (
        "InvalidParameterValue",
        "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.",
    )
    assert send(MessageDeduplicationId="d") == (  # a MessageGroupId is a fair queue's tenant
        "InvalidParameterValue",
        "Value d for parameter MessageDeduplicationId is invalid. Reason: "
        "The request include parameter that is not valid for this queue type.",
    )
    assert sqs_error(lambda: sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=11)) == (
        "InvalidParameterValue",
        "Value 11 for parameter MaxNumberOfMessages is invalid. "
        "Reason: Must be between 1 and 10, if provided.",
    )


def test_receipt_handle_errors(sqs: Any, queue_url: str) -> None:
    assert sqs_error(lambda: sqs.delete_message(QueueUrl=queue_url, ReceiptHandle="not-a-handle")) == (
        "ReceiptHandleIsInvalid",
        "The input receipt handle is invalid.",
    )
    failed = sqs.delete_message_batch(
        QueueUrl=queue_url, Entries=[{"Id": "a", "ReceiptHandle": "not-a-handle"}]
    )["Failed"]
    assert failed == [
        {
            "Id": "a",
            "SenderFault": True,
            "Code": "ReceiptHandleIsInvalid",
            "Message": 'The input receipt handle "not-a-handle" is not a valid receipt handle.',
        }
    ]


def test_batch_errors(sqs: Any, queue_url: str) -> None:
    assert sqs_error(lambda: sqs.send_message_batch(QueueUrl=queue_url, Entries=[])) == (
        "AWS.SimpleQueueService.EmptyBatchRequest",
        "There should be at least one SendMessageBatchRequestEntry in the request.",
    )
    assert sqs_error(lambda: sqs.delete_message_batch(QueueUrl=queue_url, Entries=[])) == (
        "AWS.SimpleQueueService.EmptyBatchRequest",
        "There should be at least one DeleteMessageBatchRequestEntry in the request.",
    )
    entries = [{"Id": i, "MessageBody": "x"} for i in ("a", "b", "b", "a")]
    assert sqs_error(lambda: sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)) == (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        "Id b repeated.",
    )
    assert sqs_error(
        lambda: sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": "!", "MessageBody": "x"}])
    ) == (
        "AWS.SimpleQueueService.InvalidBatchEntryId",
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
        "It can be at most 80 letters long.",
    )
    # A delay over 900 s fails its entry only.
    outcome = sqs.send_message_batch(
        QueueUrl=queue_url,
        Entries=[
            {"Id": "ok", "MessageBody": "x", "DelaySeconds": 1},
            {"Id": "late", "MessageBody": "x", "DelaySeconds": 1800},
        ],
    )
    assert [s["Id"] for s in outcome["Successful"]] == ["ok"]
    assert [(f["Id"], f["Message"]) for f in outcome["Failed"]] == [
        (
            "late",
            "Value 1800 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.",
        )
    ]


def test_fifo_send_errors_refuse_the_whole_request(sqs: Any, fifo_url: str) -> None:
    missing_group = ("MissingParameter", "The request must contain the parameter MessageGroupId.")
    missing_dedup = (
        "InvalidParameterValue",
        "The queue should either have ContentBasedDeduplication enabled "
        "or MessageDeduplicationId provided explicitly",
    )
    assert sqs_error(lambda: sqs.send_message(QueueUrl=fifo_url, MessageBody="x")) == missing_group
    assert (
        sqs_error(lambda: sqs.send_message(QueueUrl=fifo_url, MessageBody="x", MessageGroupId="g"))
        == missing_dedup
    )
    good = {"Id": "a", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "a"}
    for bad, error in (
        ({"Id": "b", "MessageBody": "x", "MessageDeduplicationId": "b"}, missing_group),
        ({"Id": "b", "MessageBody": "x", "MessageGroupId": "g"}, missing_dedup),
    ):
        assert (
            sqs_error(lambda bad=bad: sqs.send_message_batch(QueueUrl=fifo_url, Entries=[good, bad])) == error
        )
    attributes = sqs.get_queue_attributes(QueueUrl=fifo_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"  # nothing of either batch was sent


def test_tag_errors(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, tags={"kept": "yes"})["QueueUrl"]
    assert sqs_error(lambda: sqs.tag_queue(QueueUrl=url, Tags={})) == (
        "MissingParameter",
        "The request must contain the parameter Tags.",
    )
    many = {f"k{i}": "v" for i in range(51)}
    assert sqs_error(lambda: sqs.tag_queue(QueueUrl=url, Tags=many)) == (
        "InvalidParameterValue",
        f"Too many tags added for queue {name}.",
    )
    assert sqs_error(lambda: sqs.untag_queue(QueueUrl=url, TagKeys=[])) == (
        "InvalidParameterValue",
        "Tag keys must be between 1 and 128 characters in length.",
    )
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"kept": "yes"}


def test_permission_errors_and_policy(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.add_permission(QueueUrl=url, Label="one", AWSAccountIds=["111111111111"], Actions=["SendMessage"])

    def add(**params: Any) -> tuple[str, str]:
        arguments = {
            "Label": "two",
            "AWSAccountIds": ["111111111111"],
            "Actions": ["ReceiveMessage"],
            **params,
        }
        return sqs_error(lambda: sqs.add_permission(QueueUrl=url, **arguments))

    assert add(Label="one") == (
        "InvalidParameterValue",
        "Value one for parameter Label is invalid. Reason: Already exists.",
    )
    assert add(Actions=["RemovePermission"]) == (
        "InvalidParameterValue",
        "Value SQS:RemovePermission for parameter ActionName is invalid. "
        "Reason: Only the queue owner is allowed to invoke this action.",
    )
    assert add(Actions=[]) == ("MissingParameter", "The request must contain the parameter Actions.")
    assert add(AWSAccountIds=[]) == (
        "InvalidParameterValue",
        "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
    )
    eight = ["ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl"]
    eight += ["ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage"]
    assert add(Actions=eight) == ("OverLimit", "8 Actions were found, maximum allowed is 7.")
    assert sqs_error(lambda: sqs.remove_permission(QueueUrl=url, Label="none")) == (
        "InvalidParameterValue",
        "Value none for parameter Label is invalid. Reason: can't find label on existing policy.",
    )
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
    assert json.loads(policy) == {
        "Version": "2012-10-17",
        "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [
            {
                "Sid": "one",
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                "Action": "SQS:SendMessage",
                "Resource": arn,
            }
        ],
    }
