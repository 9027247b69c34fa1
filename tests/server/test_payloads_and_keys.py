"""Large payloads and encryption at rest through the endpoint: SQS's size rule on the wire, payloads
sent through the library arrive as the Extended Client Library's pointer, KMS errors in SQS's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

import durableq
from durableq.types import md5_hex

from .conftest import ServerProcess, client

BIG = 300_000


def test_payloads_stay_off_the_wire(tmp_path: Path) -> None:
    db = tmp_path / "queues.db"
    with durableq.open(db) as broker:
        queue = broker.create_queue("media", large_payloads=True, maximum_message_size=262_144)
        sent = queue.send("frame " + "x" * BIG, attributes={"camera": "2"})
    with ServerProcess(db) as server:
        sqs = client(server.url)
        url = sqs.get_queue_url(QueueName="media")["QueueUrl"]
        with pytest.raises(ClientError) as refused:  # over the size limit: refused, as SQS does
            sqs.send_message(QueueUrl=url, MessageBody="y" * BIG)
        assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
        pointer = json.loads(message["Body"])
        assert pointer == [
            "software.amazon.payloadoffloading.PayloadS3Pointer",
            {"s3BucketName": "durableq-payload-store", "s3Key": sent.message_id},
        ]
        assert message["MD5OfBody"] == md5_hex(message["Body"])  # boto3 checked it as well
        assert message["MessageAttributes"]["ExtendedPayloadSize"] == {
            "StringValue": str(BIG + 6),
            "DataType": "Number",
        }
        assert message["MessageAttributes"]["camera"]["StringValue"] == "2"


def test_encrypted_queues_need_the_servers_keyring(tmp_path: Path) -> None:
    db = tmp_path / "queues.db"
    keys = durableq.Keyring(tmp_path / "keys.json")
    keys.create("orders")
    with ServerProcess(db) as server:  # no keyring
        sqs = client(server.url)
        url = sqs.create_queue(QueueName="orders", Attributes={"KmsMasterKeyId": "alias/orders"})["QueueUrl"]
        with pytest.raises(ClientError) as denied:
            sqs.send_message(QueueUrl=url, MessageBody="secret")
        error = denied.value.response["Error"]
        assert error["Code"] == "KMS.AccessDeniedException"
        assert "keyring" in error["Message"]
        assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        missing = sqs.create_queue(QueueName="other", Attributes={"KmsMasterKeyId": "alias/none"})["QueueUrl"]
    with ServerProcess(db, "--keyring", str(keys.path)) as server:
        sqs = client(server.url)
        sqs.send_message(QueueUrl=url, MessageBody="secret")
        (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
        assert message["Body"] == "secret" and message["MD5OfBody"] == md5_hex("secret")
        with pytest.raises(ClientError) as not_found:
            sqs.send_message(QueueUrl=missing, MessageBody="secret")
        assert not_found.value.response["Error"]["Code"] == "KMS.NotFoundException"
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert (
            attributes["KmsMasterKeyId"] == "alias/orders" and attributes["SqsManagedSseEnabled"] == "false"
        )


def test_a_message_the_server_cannot_open_is_left_out_not_blocking(tmp_path: Path) -> None:
    # Sealed under a key of another keyring (the same alias, other material): SQS has no form for such
    # a message on the wire, so a receive leaves it out (it stays in flight, counted) and returns the
    # others; one that got nothing else answers with its KMS error.
    db = tmp_path / "queues.db"
    ours, theirs = durableq.Keyring(tmp_path / "keys.json"), durableq.Keyring(tmp_path / "theirs.json")
    ours.create("orders")
    theirs.create("orders")
    with durableq.open(db, keyring=theirs) as stranger:
        stranger.create_queue("orders", kms_master_key_id="alias/orders").send("sealed elsewhere")
    with ServerProcess(db, "--keyring", str(ours.path)) as server:
        sqs = client(server.url)
        url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="readable")
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        (message,) = received["Messages"]
        assert message["Body"] == "readable"
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        with pytest.raises(ClientError) as only_unreadable:
            sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        assert only_unreadable.value.response["Error"]["Code"] == "KMS.AccessDeniedException"
        assert (
            "not the key the message was encrypted with" in only_unreadable.value.response["Error"]["Message"]
        )
    with durableq.open(db, keyring=theirs) as stranger:
        (kept,) = stranger.get_queue("orders").peek()
        assert (kept.body, kept.receive_count) == (
            "sealed elsewhere",
            2,
        )  # nothing lost, each receive counted
