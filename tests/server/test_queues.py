"""Queue actions through boto3 (AWS JSON 1.0): create, find, list, attributes, tags, permissions, errors."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

import pytest

from .conftest import ACCOUNT, REGION, ServerProcess, error_of
from .test_peek import NS, peek


def arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def test_create_get_list_and_delete(sqs: Any, server: ServerProcess, name: str) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url == f"{server.url}/{ACCOUNT}/{name}"
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url  # the same queue again
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert url in sqs.list_queues()["QueueUrls"]
    assert sqs.list_queues(QueueNamePrefix=name)["QueueUrls"] == [url]
    sqs.delete_queue(QueueUrl=url)
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=name)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as missing:
        sqs.get_queue_url(QueueName=name)
    assert error_of(missing) == ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400)


def test_a_bare_name_or_any_url_ending_in_the_name_is_a_queue_url(
    sqs: Any, queue_url: str, name: str
) -> None:
    for given in (name, f"https://elsewhere.example/{ACCOUNT}/{name}", f"/queues/{name}"):
        sqs.send_message(QueueUrl=given, MessageBody="x")
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"] == {"ApproximateNumberOfMessages": "3"}
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):  # another account's: another namespace
        sqs.send_message(QueueUrl=f"https://elsewhere.example/123456789012/{name}", MessageBody="x")


def test_list_queues_pages_with_max_results_and_next_token(sqs: Any, name: str) -> None:
    urls = [sqs.create_queue(QueueName=f"{name}-{i}")["QueueUrl"] for i in range(5)]
    pages, token = [], None
    while True:
        page = sqs.list_queues(QueueNamePrefix=name, MaxResults=2, **({"NextToken": token} if token else {}))
        pages.append(page["QueueUrls"])
        token = page.get("NextToken")
        if token is None:
            break
    assert pages == [urls[0:2], urls[2:4], urls[4:5]]
    paginated = sqs.get_paginator("list_queues").paginate(
        QueueNamePrefix=name, PaginationConfig={"PageSize": 3}
    )
    assert [url for page in paginated for url in page["QueueUrls"]] == urls


def test_queue_attributes_all_counters_and_read_only(sqs: Any, queue_url: str, name: str) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="now")
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=600)
    sqs.send_message(QueueUrl=queue_url, MessageBody="held")
    sqs.receive_message(QueueUrl=queue_url)
    everything = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert {
        k: everything[k]
        for k in (
            "QueueArn",
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
            "VisibilityTimeout",
            "DelaySeconds",
            "MessageRetentionPeriod",
            "MaximumMessageSize",
            "ReceiveMessageWaitTimeSeconds",
            "SqsManagedSseEnabled",
        )
    } == {
        "QueueArn": arn(name),
        "ApproximateNumberOfMessages": "1",
        "ApproximateNumberOfMessagesNotVisible": "1",
        "ApproximateNumberOfMessagesDelayed": "1",
        "VisibilityTimeout": "30",
        "DelaySeconds": "0",
        "MessageRetentionPeriod": "345600",
        "MaximumMessageSize": "1048576",
        "ReceiveMessageWaitTimeSeconds": "0",
        "SqsManagedSseEnabled": "false",  # encryption at rest is opt-in (README: differences)
    }
    assert int(everything["CreatedTimestamp"]) <= int(everything["LastModifiedTimestamp"])
    assert "FifoQueue" not in everything and "RedrivePolicy" not in everything
    assert sqs.get_queue_attributes(QueueUrl=queue_url).get("Attributes") is None  # no names: none
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Colour"])
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"QueueArn": "x"})


def test_set_queue_attributes_and_library_checks(sqs: Any, queue_url: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "45", "DelaySeconds": "5"})
    got = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout", "DelaySeconds"])
    assert got["Attributes"] == {"VisibilityTimeout": "45", "DelaySeconds": "5"}
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "43201"})
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"DelaySeconds": "soon"})
    with pytest.raises(sqs.exceptions.InvalidAttributeName):  # FIFO-only, on a standard queue
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"ContentBasedDeduplication": "true"})


def test_create_queue_with_other_attributes_is_refused(sqs: Any, queue_url: str, name: str) -> None:
    with pytest.raises(sqs.exceptions.QueueNameExists) as refused:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "7"})
    assert error_of(refused) == ("QueueAlreadyExists", "QueueNameExists", 400)
    with pytest.raises(sqs.exceptions.ClientError) as bad_name:
        sqs.create_queue(QueueName="no spaces")
    assert error_of(bad_name)[0] == "InvalidParameterValue"


def test_fifo_queue_attributes(sqs: Any, name: str) -> None:
    url = sqs.create_queue(
        QueueName=f"{name}.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "true",
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
        },
    )["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {
        k: got[k]
        for k in ("FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
    } == {
        "FifoQueue": "true",
        "ContentBasedDeduplication": "true",
        "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId",
    }
    with pytest.raises(sqs.exceptions.ClientError) as suffix:
        sqs.create_queue(QueueName=f"{name}-plain.fifo")  # a .fifo name needs FifoQueue=true
    assert error_of(suffix)[0] == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "false"})


def test_redrive_policies_and_dead_letter_sources(sqs: Any, name: str) -> None:
    dlq = sqs.create_queue(
        QueueName=f"{name}-dlq",
        Attributes={
            "RedriveAllowPolicy": json.dumps(
                {"redrivePermission": "byQueue", "sourceQueueArns": [arn(f"{name}-src")]}
            )
        },
    )["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": arn(f"{name}-dlq"), "maxReceiveCount": "3"})
    source = sqs.create_queue(QueueName=f"{name}-src", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(got["RedrivePolicy"]) == {
        "deadLetterTargetArn": arn(f"{name}-dlq"),
        "maxReceiveCount": 3,
    }
    allow = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["RedriveAllowPolicy"])["Attributes"]
    assert json.loads(allow["RedriveAllowPolicy"]) == {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [arn(f"{name}-src")],
    }
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [source]
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):  # not allowed by the byQueue policy
        sqs.create_queue(QueueName=f"{name}-other", Attributes={"RedrivePolicy": policy})
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": "{not json"})
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == []  # required, also when empty


def test_purge_queue(sqs: Any, queue_url: str) -> None:
    sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(3)])
    sqs.purge_queue(QueueUrl=queue_url)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)


def test_tags(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, tags={"team": "billing"})["QueueUrl"]
    sqs.tag_queue(QueueUrl=url, Tags={"env": "test", "team": "payments"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "test", "team": "payments"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["env", "team"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_permissions_are_kept_in_the_policy_attribute(sqs: Any, queue_url: str, name: str) -> None:
    sqs.add_permission(
        QueueUrl=queue_url,
        Label="readers",
        AWSAccountIds=["111122223333"],
        Actions=["ReceiveMessage", "DeleteMessage"],
    )
    policy = json.loads(
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    )
    (statement,) = policy["Statement"]
    assert statement["Sid"] == "readers" and statement["Resource"] == arn(name)
    assert statement["Action"] == ["SQS:ReceiveMessage", "SQS:DeleteMessage"]
    with pytest.raises(sqs.exceptions.ClientError) as twice:
        sqs.add_permission(QueueUrl=queue_url, Label="readers", AWSAccountIds=["111122223333"], Actions=["*"])
    assert error_of(twice)[0] == "InvalidParameterValue"
    sqs.remove_permission(QueueUrl=queue_url, Label="readers")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])


def test_every_queue_action_on_a_missing_queue_says_so(sqs: Any, server: ServerProcess) -> None:
    url = f"{server.url}/{ACCOUNT}/missing"
    calls = [
        lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
        lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "1"}),
        lambda: sqs.purge_queue(QueueUrl=url),
        lambda: sqs.delete_queue(QueueUrl=url),
        lambda: sqs.list_queue_tags(QueueUrl=url),
        lambda: sqs.send_message(QueueUrl=url, MessageBody="x"),
        lambda: sqs.receive_message(QueueUrl=url),
    ]
    for call in calls:
        with pytest.raises(sqs.exceptions.QueueDoesNotExist):
            call()


# -- the developer's peek and the namespace prefix, on this module's endpoint (see test_peek.py)


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


def test_the_namespace_prefix_is_refused_in_the_servers_own(sqs: Any) -> None:
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.create_queue(QueueName="_ns_000000000000_us-west-2_sneaky")
    assert error_of(refused)[0] == "InvalidParameterValue"


def test_peek_of_another_accounts_url_shows_that_accounts_queue(
    sqs: Any, queue_url: str, server: Any
) -> None:
    """A queue URL names its account's namespace for the peek as for every action: another account's
    queue of the same name is not this one (here it does not exist)."""
    sqs.send_message(QueueUrl=queue_url, MessageBody="the server's own account's")
    name = queue_url.rsplit("/", 1)[-1]
    status, body = peek(server.url, f"{server.url}/111122223333/{name}")
    assert status == 400 and b"AWS.SimpleQueueService.NonExistentQueue" in body
