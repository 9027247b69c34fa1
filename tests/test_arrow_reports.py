"""``durableq.arrow``: the history reports as Arrow tables, over the events the library reads, on
both engines (their numbers equal Spark's: tests/analytics/test_history_metrics.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

import durableq
from durableq import RedrivePolicy, arrow
from tests.conftest import FakeClock


def test_wait_tells_the_delay_from_the_queueing(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs", history=True)
    jobs.send("at once")
    jobs.send("delayed", delay_seconds=30)
    clock.advance(40)
    assert len(jobs.receive(10)) == 2
    [sent, visible] = arrow.report(broker, "wait").to_pylist()
    assert sent == {
        "queue": "jobs",
        "measured_from": "sent",
        "messages": 2,
        "p50": 40.0,
        "p90": 40.0,
        "p95": 40.0,
        "p99": 40.0,
        "max": 40.0,
    }
    # Since visible: 40 s for the one sent at once, 10 s for the delayed one.
    assert (visible["measured_from"], visible["p50"], visible["max"]) == ("visible", 10.0, 40.0)
    exact = arrow.report(broker, "wait", exact=True).to_pylist()[1]
    assert exact["p50"] == 25.0 and exact["p90"] == pytest.approx(37.0)


def test_a_dead_letter_queue_s_receives_are_its_own(broker: durableq.Broker, clock: FakeClock) -> None:
    dlq = broker.create_queue("jobs-dlq", history=True)
    jobs = broker.create_queue("jobs", history=True, redrive_policy=RedrivePolicy("jobs-dlq", 2))
    jobs.send("poison")
    for _ in range(2):
        assert jobs.receive(1, visibility_timeout=1)
        clock.advance(2)
    assert jobs.receive(1) == []  # moves it to the dead-letter queue, received twice
    [message] = dlq.receive(1)
    dlq.delete(message.receipt_handle)
    rows = {r["queue"]: r for r in arrow.report(broker, "retries").to_pylist()}
    assert (rows["jobs"]["dead_lettered"], rows["jobs"]["max"]) == (1, 2)
    assert (rows["jobs-dlq"]["deleted_first_receive"], rows["jobs-dlq"]["max"]) == (1, 1)


def test_completed_in_the_window_and_bad_input(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs", history=True)
    jobs.send("old")
    clock.advance(60)
    since = durableq.types.datetime_from_ms(int(clock() * 1000))
    [message] = jobs.receive(1)
    jobs.delete(message.receipt_handle)
    assert arrow.report(broker, "latency", since=since).num_rows == 0  # its send is before the window
    [row] = arrow.report(broker, "latency", since=since, completed_in_window=True).to_pylist()
    assert (row["messages"], row["max"]) == (1, 60.0)
    with pytest.raises(durableq.InvalidParameterValue, match="unknown report 'ages'; choose one of"):
        arrow.report(broker, "ages")
    with pytest.raises(durableq.InvalidParameterValue, match="since must be a timezone-aware datetime"):
        arrow.report(broker, "wait", since=datetime(2026, 1, 1))
    with pytest.raises(durableq.InvalidParameterValue, match="must be earlier than until"):
        arrow.report(broker, "wait", since=since, until=since)
    assert arrow.read_events(broker).schema == arrow.EVENTS_SCHEMA
