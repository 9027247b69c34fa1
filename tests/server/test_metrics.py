"""``GET /metrics``: the queues' depth and counters in the Prometheus text format."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import durableq

from .conftest import ServerProcess, client


def scrape(url: str) -> dict[tuple[str, str], float]:
    """Every sample of ``/metrics``: (sample name, queue label or "") -> value."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")  # the exposition format
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("queue", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_show_each_queues_depth_and_counters(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "queues.db") as server:
        sqs = client(server.url)
        orders = sqs.create_queue(QueueName="orders")["QueueUrl"]
        sqs.create_queue(QueueName="empty")
        for n in range(5):
            sqs.send_message(QueueUrl=orders, MessageBody=f"order {n}")
        sqs.send_message(QueueUrl=orders, MessageBody="later", DelaySeconds=600)
        received = sqs.receive_message(QueueUrl=orders, MaxNumberOfMessages=2, VisibilityTimeout=600)
        received = received["Messages"]
        sqs.delete_message(QueueUrl=orders, ReceiptHandle=received[0]["ReceiptHandle"])
        sqs.receive_message(QueueUrl=f"{server.url}/000000000000/empty")
        samples = scrape(server.url)
        with durableq.open(server.db) as broker:  # the library's own figures, read from the file
            stats = broker.get_queue("orders").stats()
    visible, in_flight, delayed = (
        stats.approximate_number_of_messages,
        stats.approximate_number_of_messages_not_visible,
        stats.approximate_number_of_messages_delayed,
    )
    assert (visible, in_flight, delayed) == (3, 1, 1)
    assert samples["durableq_messages_visible", "orders"] == visible
    assert samples["durableq_messages_in_flight", "orders"] == in_flight
    assert samples["durableq_messages_delayed", "orders"] == delayed
    assert samples["durableq_messages_visible", "empty"] == 0
    assert samples["durableq_sent_total", "orders"] == 6
    assert samples["durableq_received_total", "orders"] == 2
    assert samples["durableq_deleted_total", "orders"] == 1
    assert samples["durableq_empty_receives_total", "empty"] == 1
    assert samples["durableq_sent_total", "empty"] == 0
    assert ("durableq_server_waiting_receives", "") in samples


def test_a_browser_cannot_read_metrics(server: ServerProcess) -> None:
    request = urllib.request.Request(f"{server.url}/metrics", headers={"Origin": "https://evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
