"""Any account and region on one endpoint, each its own namespace (as SQS keeps them apart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

import durableq

from .conftest import ACCOUNT, REGION, ServerProcess


def _client(url: str, region: str) -> Any:
    return boto3.client(
        "sqs", endpoint_url=url, region_name=region, aws_access_key_id="t", aws_secret_access_key="t"
    )


def _names(client: Any) -> list[str]:
    return sorted(url.rsplit("/", 1)[-1] for url in client.list_queues().get("QueueUrls", []))


def test_each_region_and_account_is_a_namespace_of_its_own(tmp_path: Path) -> None:
    db = tmp_path / "queues.db"
    with ServerProcess(db) as server:
        home, west = _client(server.url, REGION), _client(server.url, "us-west-2")
        home_url = home.create_queue(QueueName="jobs")["QueueUrl"]
        west_url = west.create_queue(QueueName="jobs", Attributes={"VisibilityTimeout": "5"})["QueueUrl"]
        assert home_url == west_url == f"{server.url}/{ACCOUNT}/jobs"  # the URL has no region, as SQS's
        west.create_queue(QueueName="only-west")
        assert _names(home) == ["jobs"] and _names(west) == ["jobs", "only-west"]
        home.send_message(QueueUrl=home_url, MessageBody="home's")
        west.send_message(QueueUrl=west_url, MessageBody="west's")
        assert home.receive_message(QueueUrl=home_url)["Messages"][0]["Body"] == "home's"
        assert west.receive_message(QueueUrl=west_url)["Messages"][0]["Body"] == "west's"
        arn = west.get_queue_attributes(QueueUrl=west_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        assert arn == f"arn:aws:sqs:us-west-2:{ACCOUNT}:jobs"
        # A redrive policy names the dead-letter queue by the ARN of its namespace.
        policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
        west.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})
        with pytest.raises(home.exceptions.ClientError):  # no queue "jobs" of us-west-2 from home's view
            home.create_queue(QueueName="work", Attributes={"RedrivePolicy": policy})
        # Another account: the account in the queue URL.
        other = f"{server.url}/111122223333/jobs"
        with pytest.raises(home.exceptions.QueueDoesNotExist):
            home.send_message(QueueUrl=other, MessageBody="nobody's")
        with pytest.raises(home.exceptions.QueueDoesNotExist):
            home.get_queue_url(QueueName="jobs", QueueOwnerAWSAccountId="111122223333")
        assert home.get_queue_url(QueueName="jobs", QueueOwnerAWSAccountId=ACCOUNT)["QueueUrl"] == home_url
    # The library sees the other namespaces' queues under their prefix; the server's own as they are.
    with durableq.open(db) as broker:
        assert broker.list_queues() == [
            "_ns_000000000000_us-west-2_jobs",
            "_ns_000000000000_us-west-2_only-west",
            "_ns_000000000000_us-west-2_work",
            "jobs",
        ]


def test_errors_in_another_namespace_name_its_queues_as_the_client_does() -> None:
    """The library names another namespace's queues with the ``_ns_`` prefix; a client of that namespace
    never sees it, in an error's message either (a whole request's, or a batch entry's)."""
    from durableq.testing import sqs_endpoint

    with sqs_endpoint() as endpoint:
        west = _client(endpoint.url, "us-west-2")
        jobs = west.create_queue(QueueName="jobs")["QueueUrl"]
        missing = json.dumps(
            {"deadLetterTargetArn": f"arn:aws:sqs:us-west-2:{ACCOUNT}:nope", "maxReceiveCount": 3}
        )
        with pytest.raises(west.exceptions.ClientError) as refused:
            west.create_queue(QueueName="work", Attributes={"RedrivePolicy": missing})
        message = refused.value.response["Error"]["Message"]
        assert "nope" in message and "_ns_" not in message
        failed = west.send_message_batch(
            QueueUrl=jobs, Entries=[{"Id": "a", "MessageBody": "x", "MessageDeduplicationId": "d"}]
        )["Failed"]
        assert failed and all("_ns_" not in entry["Message"] for entry in failed)
