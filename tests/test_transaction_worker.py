"""Worker(transactional=True): the handler's writes and the message's delete in one commit."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import durableq
from durableq import InvalidParameterValue
from tests.conftest import FakeClock, sql_rows, sql_run, until


def make_shipments(target: str) -> None:
    key = "SERIAL" if target.startswith("postgresql://") else "INTEGER"
    sql_run(target, f"CREATE TABLE shipments (id {key} PRIMARY KEY, message_id TEXT, body TEXT)")


def shipments(target: str) -> list[tuple[Any, ...]]:
    return sql_rows(target, "SELECT message_id, body FROM shipments ORDER BY body")


def record(message: durableq.Message, tx: durableq.Transaction) -> None:
    tx.execute("INSERT INTO shipments (message_id, body) VALUES (?, ?)", (message.message_id, message.body))


def test_effects_and_deletes_commit_together(broker: durableq.Broker, target: str) -> None:
    make_shipments(target)
    queue = broker.create_queue("orders")
    done = broker.create_queue("done")

    def handler(message: durableq.Message, tx: durableq.Transaction) -> None:
        record(message, tx)
        done.send(message.body, transaction=tx)

    for i in range(5):
        queue.send(f"order {i}")
    durableq.Worker(queue, handler, transactional=True, idle_timeout=0.5, wait_time=1).run()
    assert [body for _, body in shipments(target)] == [f"order {i}" for i in range(5)]
    assert sorted(m.body for m in done.receive(max_messages=10, wait_time=0)) == [
        f"order {i}" for i in range(5)
    ]
    stats = queue.stats()
    assert stats.approximate_number_of_messages == stats.approximate_number_of_messages_not_visible == 0


def test_a_failure_rolls_the_effects_back_and_the_message_returns(
    broker: durableq.Broker, target: str, clock: FakeClock
) -> None:
    make_shipments(target)
    dlq = broker.create_queue("orders-dlq")
    queue = broker.create_queue(
        "orders", redrive_policy=durableq.RedrivePolicy("orders-dlq", max_receive_count=2)
    )

    def handler(message: durableq.Message, tx: durableq.Transaction) -> None:
        record(message, tx)
        raise RuntimeError("the carrier is down")

    queue.send("order 1")
    durableq.Worker(queue, handler, transactional=True, idle_timeout=0.5, wait_time=1).run()
    assert shipments(target) == []  # rolled back with the failure
    assert queue.stats().approximate_number_of_messages_not_visible == 1  # back after its back-off
    clock.advance(60)
    durableq.Worker(queue, handler, transactional=True, idle_timeout=0.5, wait_time=1).run()
    assert shipments(target) == []
    queue.receive(wait_time=0)  # its third receive moves it to the dead-letter queue
    assert [m.body for m in dlq.receive(wait_time=0)] == ["order 1"]


@pytest.mark.parametrize("first", ["other", "worker"])
def test_a_message_received_again_after_its_timeout_commits_one_effect(
    broker: durableq.Broker, target: str, clock: FakeClock, first: str
) -> None:
    """The worker's handler outlives the message's visibility timeout (the heartbeat is far off), and
    another consumer receives it meanwhile: whichever finishes first, one effect commits."""
    make_shipments(target)
    queue = broker.create_queue("orders", visibility_timeout=30)
    queue.send("order 1")
    started, finish = threading.Event(), threading.Event()

    def handler(message: durableq.Message, tx: durableq.Transaction) -> None:
        started.set()
        finish.wait(30)
        record(message, tx)

    worker = durableq.Worker(queue, handler, transactional=True, heartbeat_interval=30, wait_time=1)
    running = threading.Thread(target=worker.run)
    running.start()
    try:
        assert started.wait(30)
        clock.advance(31)  # the worker's receipt expires
        if broker.path is not None:
            # SQLite: the handler's transaction holds the write lock, so no other consumer can receive
            # meanwhile: the worker's receipt is still the latest, and its transaction commits.
            finish.set()
            until(lambda: not worker._jobs, "the worker settled its job")
            assert len(shipments(target)) == 1
            assert queue.receive(wait_time=0) == []
            return
        (again,) = queue.receive(wait_time=0)
        # Why the worker guards its delete: on a standard queue a delete accepts any handle the
        # message ever had, so a plain delete with the worker's old handle would succeed.
        if first == "other":
            with broker.transaction() as tx:
                record(again, tx)
                queue.delete(again.receipt_handle, transaction=tx)
            finish.set()
        else:
            finish.set()
            until(lambda: not worker._jobs, "the worker settled its job")
            with broker.transaction() as tx:
                record(again, tx)
                queue.delete(again.receipt_handle, transaction=tx)
        until(lambda: not worker._jobs, "the worker settled its job")
    finally:
        finish.set()
        worker.stop()
        running.join(30)
    assert len(shipments(target)) == 1  # the worker's stale transaction rolled back
    assert queue.stats().approximate_number_of_messages_not_visible == 0


def test_transactional_and_respond_are_refused_together(broker: durableq.Broker) -> None:
    queue = broker.create_queue("requests")
    with pytest.raises(InvalidParameterValue, match="transactional or a responder"):
        durableq.Worker(queue, record, transactional=True, respond=True)
