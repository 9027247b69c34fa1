"""``events()``, ``audit()`` and the latency, processing and retries reports, checked against what
``Queue.events()`` and ``Broker.audit()`` say about traffic written through the library."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq.analytics import AUDIT_SCHEMA, EVENTS_SCHEMA, QueueAnalytics, to_rows
from durableq.analytics.reports import ACCURACY, PERCENTILES
from durableq.ops import history
from tests.conftest import FakeClock

from . import history_traffic, reference


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FakeClock]:
    path = tmp_path_factory.mktemp("history") / "history.db"
    return path, history_traffic.build(path)


@pytest.fixture(scope="module")
def opened(spark: SparkSession, traffic: tuple[Path, FakeClock]) -> Iterator[QueueAnalytics]:
    path, clock = traffic
    with QueueAnalytics.open(path, spark=spark, clock=clock, partitions=3) as analytics:
        yield analytics


@pytest.fixture(scope="module")
def expected(traffic: tuple[Path, FakeClock]) -> list[durableq.MessageEvent]:
    return history_traffic.library_events(*traffic)


def test_events_are_the_library_s_with_the_declared_schema(
    opened: QueueAnalytics, expected: list[durableq.MessageEvent]
) -> None:
    frame = opened.events()
    assert frame.schema == EVENTS_SCHEMA
    rows = sorted(to_rows(frame), key=lambda r: r["event_id"])
    assert rows == [
        {
            "event_id": e.event_id,
            "at": e.at,
            "queue": e.queue,
            "event": e.event,
            "message_id": e.message_id,
            "receive_count": e.receive_count,
            "other_queue": e.other_queue,
            "visible_at": e.visible_at,
        }
        for e in expected
    ]
    kinds = Counter(e.event for e in expected)
    assert {history.SENT, history.RECEIVED, history.DELETED, history.MOVED_TO_DEAD_LETTER} <= set(kinds)
    assert {e.queue for e in expected} == set(history_traffic.HISTORY_QUEUES)  # "plain" keeps none
    # Filters reach SQLite (nothing is cached before them), the read is split in parts.
    plan = frame.where("event = 'deleted'")._jdf.queryExecution().executedPlan().toString()
    assert "EqualTo(event,deleted)" in plan
    assert frame.rdd.getNumPartitions() == 3


def test_the_window_is_pushed_into_the_query_on_at(
    spark: SparkSession, traffic: tuple[Path, FakeClock], expected: list[durableq.MessageEvent]
) -> None:
    path, clock = traffic
    since, until = expected[100].at, expected[-100].at
    with QueueAnalytics.open(path, spark=spark, clock=clock, since=since, until=until) as analytics:
        frame = analytics.events()
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert "GreaterThanOrEqual(at," in plan and "LessThan(at," in plan
        got = sorted(r["event_id"] for r in to_rows(frame.select("event_id")))
    assert got == [e.event_id for e in expected if since <= e.at < until]
    assert 0 < len(got) < len(expected)


def test_audit_is_the_library_s(opened: QueueAnalytics, traffic: tuple[Path, FakeClock]) -> None:
    path, clock = traffic
    with durableq.open(path, clock=clock, durability="normal") as broker:
        trail = broker.audit(limit=100_000)
    frame = opened.audit()
    assert frame.schema == AUDIT_SCHEMA
    rows = sorted(to_rows(frame), key=lambda r: r["event_id"])
    got = [{**r, "detail": json.loads(r["detail"])} for r in rows]
    assert got == [
        {
            "event_id": a.event_id,
            "at": a.at,
            "pid": a.pid,
            "user": a.user,
            "action": a.action,
            "queue": a.queue,
            "outcome": a.outcome,
            "detail": a.detail,
        }
        for a in trail
        if a.event_id <= rows[-1]["event_id"]  # opening the broker here may add calls
    ]
    assert [r["action"] for r in rows[:3]] == ["CreateQueue"] * 3


def _check_distribution(row: dict[str, Any], values: list[float]) -> None:
    assert row["messages"] == len(values)
    assert row["max"] == max(values)
    for fraction in PERCENTILES:
        # percentile_approx answers a value of the data whose rank is within n / ACCURACY of the
        # exact rank (reference.rank_window allows that, plus one for rounding the rank).  With
        # fewer values than ACCURACY the window is a rank or two wide.
        low, high = reference.rank_window(values, fraction, ACCURACY)
        assert low <= row[f"p{round(fraction * 100)}"] <= high, fraction
        assert row[f"p{round(fraction * 100)}"] in values


def test_latency_and_processing(opened: QueueAnalytics, expected: list[durableq.MessageEvent]) -> None:
    latency: dict[str, list[float]] = defaultdict(list)
    processing: dict[str, list[float]] = defaultdict(list)
    for (queue, _), events in history_traffic.per_message(expected).items():
        deleted = events.get(history.DELETED)
        if not deleted:
            continue
        if history.SENT in events:
            latency[queue].append((deleted[-1] - events[history.SENT][0]) / 1000)
        if history.RECEIVED in events:
            processing[queue].append((deleted[-1] - max(events[history.RECEIVED])) / 1000)
    for name, values in (("latency", latency), ("processing", processing)):
        report = {r["queue"]: r for r in to_rows(opened.report(name))}
        assert sorted(report) == sorted(values), name  # no row for a queue without history
        for queue, row in report.items():
            _check_distribution(row, values[queue])
    # The dead-lettered messages that were deleted were sent to "jobs", not to "jobs-dlq".
    assert "jobs-dlq" not in latency and "jobs-dlq" in processing
    assert len(set(latency["jobs"])) > 10  # the traffic spreads the times


def test_retries(opened: QueueAnalytics, expected: list[durableq.MessageEvent]) -> None:
    ended: dict[str, list[tuple[str, int]]] = defaultdict(list)
    arrived_with: dict[tuple[str, str], int] = {}
    for e in expected:
        if e.event in (history.SENT, history.MOVED_IN):
            arrived_with[(e.queue, e.message_id)] = e.receive_count
        if e.event in (history.DELETED, history.MOVED_TO_DEAD_LETTER):
            # Receives in this queue: a dead letter arrives with the count that sent it there.
            receives = e.receive_count - arrived_with[(e.queue, e.message_id)]
            ended[e.queue].append((e.event, receives))
    report = {r["queue"]: r for r in to_rows(opened.retries())}
    assert sorted(report) == sorted(ended)
    for queue, row in report.items():
        counts = Counter(
            "dead_lettered"
            if event == history.MOVED_TO_DEAD_LETTER
            else "deleted_first_receive"
            if receives <= 1
            else "deleted_after_retries"
            for event, receives in ended[queue]
        )
        for column in ("deleted_first_receive", "deleted_after_retries", "dead_lettered"):
            assert row[column] == counts[column], (queue, column)
        _check_distribution(row, [float(receives) for _, receives in ended[queue]])
    jobs = report["jobs"]
    assert jobs["deleted_first_receive"] and jobs["deleted_after_retries"] and jobs["dead_lettered"]
    assert jobs["max"] == 2
    # The dead-letter queue's receives are its own: round 1 deletes 5 after their first receive there,
    # round 2 the 5 left in flight, received there again.  The two receives in "jobs" that sent them
    # there are not counted (they were: 0 first receives, max 4).
    dlq = report["jobs-dlq"]
    assert (dlq["deleted_first_receive"], dlq["deleted_after_retries"], dlq["max"]) == (5, 5, 2)
