"""Fixtures of the docs tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import durableq


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file like the ones the docs' commands look at: `orders` (with a dead-letter queue that
    holds three messages) and `emails`, with messages visible, in flight and delayed."""
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    with durableq.open(path, durability="normal") as broker:
        broker.create_queue("orders-dlq")
        orders = broker.create_queue("orders", redrive_policy=durableq.RedrivePolicy("orders-dlq", 1))
        emails = broker.create_queue("emails")
        orders.send_batch([durableq.SendEntry(str(i), f"order {i}") for i in range(10)])
        emails.send_batch([durableq.SendEntry(str(i), f"email {i}", delay_seconds=600) for i in range(3)])
        emails.send("welcome")
        for message in orders.receive(max_messages=3, visibility_timeout=0):
            assert message.receive_count == 1  # released at once: the next receive moves it
        in_flight = orders.receive(max_messages=10)  # moves those three to the dead-letter queue
        assert len(in_flight) == 7
        assert broker.get_queue("orders-dlq").stats().approximate_number_of_messages == 3
    return path
