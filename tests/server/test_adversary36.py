"""Adversary 36 at the endpoint: a server that stops while a long poll's claim runs puts it back."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq.server import serve
from tests.conftest import HeldLook, threads_inside, until

from .test_capacity import health, impatient


def test_a_server_stopping_while_a_poll_claims_puts_the_message_back(
    tmp_path: Path, held_look: HeldLook
) -> None:
    """``shutdown()`` ends waiting polls; one whose look is claiming then (a pool thread) waits for it,
    answers empty, and the message is back in the file, visible and uncounted, when the server has
    stopped and closed it."""
    server = serve(tmp_path / "q.db", port=0, durability="normal")
    sqs = impatient(server)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    got: list[Any] = []
    poll = threading.Thread(target=lambda: got.append(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)))
    poll.start()
    until(lambda: health(server)[1]["waiting_receives"] == 1, "the poll waits")
    held_look.arm()
    sqs.send_message(QueueUrl=url, MessageBody="claimed as the server stops")
    until(held_look.holding, "the poll's look is held")
    stopping = threading.Thread(target=server.shutdown)
    stopping.start()
    # Runner.stop cancels the polls, then joins the server's thread: the cancel is queued on the loop
    # before the held look's result can be.
    until(lambda: stopping.ident in threads_inside(threading.Thread.join.__code__), "the polls are cancelled")
    held_look.open()
    stopping.join(60)
    poll.join(60)
    assert not stopping.is_alive() and not poll.is_alive()
    assert got and "Messages" not in got[0]
    with durableq.open(tmp_path / "q.db") as broker:
        [message] = broker.get_queue("q").receive()
    assert message.body == "claimed as the server stops"
    assert message.receive_count == 1


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_start_message_move_task_out_of_no_dead_letter_queue_is_a_400(tmp_path: Path, region: str) -> None:
    """The library's rule in SQS's words: InvalidParameterValue, 400, the queue named as the client
    knows it (in another region's namespace too); no task is started."""
    import boto3
    from botocore.exceptions import ClientError

    from .conftest import error_of

    with serve(tmp_path / "q.db", port=0, durability="normal") as server:
        sqs = boto3.client(
            "sqs",
            endpoint_url=server.url,
            region_name=region,
            aws_access_key_id="t",
            aws_secret_access_key="t",
        )
        url = sqs.create_queue(QueueName="plain")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        with pytest.raises(ClientError) as refused:
            sqs.start_message_move_task(SourceArn=arn)
        assert error_of(refused)[::2] == ("InvalidParameterValue", 400)
        assert arn.startswith(f"arn:aws:sqs:{region}:")
        assert "'plain' is no queue's dead-letter queue" in refused.value.response["Error"]["Message"]
        assert sqs.list_message_move_tasks(SourceArn=arn)["Results"] == []
