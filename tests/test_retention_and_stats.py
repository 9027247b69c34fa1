"""Retention removes old messages; stats and the per-minute counters."""

from __future__ import annotations

from datetime import UTC, datetime

import durableq
from tests.conftest import FakeClock, sql_rows


def _rows(target: str, queue: str) -> int:
    [(count,)] = sql_rows(
        target,
        "SELECT count(*) FROM durableq_messages JOIN durableq_queues q ON q.id = queue_id WHERE q.name = ?",
        queue,
    )
    return int(count)


def test_expired_messages_are_never_returned_and_are_removed(
    broker: durableq.Broker, clock: FakeClock, target: str
) -> None:
    queue = broker.create_queue("short", retention_period=60)
    queue.send("old")
    queue.send("in flight")
    queue.send("delayed", delay_seconds=120)
    queue.receive()
    clock.advance(59)
    queue.send("young")
    clock.advance(1)
    assert [m.body for m in queue.receive(10)] == ["young"]
    assert _rows(target, "short") == 1
    stats = queue.stats()
    assert stats.approximate_number_of_messages_not_visible == 1  # "young" now
    assert stats.approximate_number_of_messages_delayed == 0
    assert sum(m.expired for m in queue.metrics()) == 3


def test_retention_counts_from_the_send(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue("short", retention_period=60)
    queue.send("x")
    clock.advance(59.999)
    assert len(queue.receive()) == 1
    clock.advance(0.001)
    assert queue.receive() == []


def test_stats_count_messages_by_state(queue: durableq.Queue, clock: FakeClock) -> None:
    for i in range(5):
        queue.send(f"v{i}")
    queue.send("d1", delay_seconds=30)
    queue.send("d2", delay_seconds=30)
    queue.receive(3)
    clock.advance(10)
    stats = queue.stats()
    assert stats.approximate_number_of_messages == 2
    assert stats.approximate_number_of_messages_not_visible == 3
    assert stats.approximate_number_of_messages_delayed == 2
    assert stats.oldest_message_age == 10


def test_stats_of_an_empty_queue(queue: durableq.Queue) -> None:
    assert queue.stats() == durableq.QueueStats(0, 0, 0, 0)


def test_stats_never_mix_queues(broker: durableq.Broker) -> None:
    one, two = broker.create_queue("one"), broker.create_queue("two")
    one.send("x")
    assert two.stats().approximate_number_of_messages == 0
    assert one.stats().approximate_number_of_messages == 1


def test_per_minute_counters(queue: durableq.Queue, clock: FakeClock) -> None:
    minute = datetime.fromtimestamp(clock() - clock() % 60, tz=UTC)
    queue.send("a")
    queue.send("b")
    first = queue.receive(2)
    queue.delete(first[0].receipt_handle)
    assert queue.receive() == []
    clock.advance(60)
    queue.send("c")
    counters = queue.metrics()
    assert counters[0] == durableq.MinuteMetrics(minute, 2, 2, 1, 0, 0, 1)
    assert counters[1].sent == 1 and counters[1].minute.timestamp() == minute.timestamp() + 60
    assert queue.metrics(since=counters[1].minute) == counters[1:]


def test_counters_of_another_broker_reach_the_file(target: str, clock: FakeClock) -> None:
    with durableq.open(target, clock=clock) as producer:
        producer.create_queue("jobs").send("x")
    with durableq.open(target, clock=clock) as reader:
        assert [m.sent for m in reader.get_queue("jobs").metrics()] == [1]


def test_counters_are_written_within_a_second_without_closing(target: str, clock: FakeClock) -> None:
    import time

    with durableq.open(target, clock=clock) as producer, durableq.open(target, clock=clock) as reader:
        producer.create_queue("jobs").send("x")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not reader.get_queue("jobs").metrics():
            time.sleep(0.05)  # the flusher writes in the background, once per second
        assert [m.sent for m in reader.get_queue("jobs").metrics()] == [1]
