"""The wait report, p95, exact percentiles and the "completed in the window" mode, checked against
plain Python over the library's events; and ``durableq.arrow``'s reports, equal to Spark's."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq import RedrivePolicy, SendEntry, arrow
from durableq.analytics import QueueAnalytics, to_rows
from durableq.analytics.reports import ACCURACY, PERCENTILES
from durableq.ops import history
from tests.conftest import FakeClock

from . import reference
from .scenario import START

Events = list[durableq.MessageEvent]


def _traffic(path: Path) -> FakeClock:
    """Two queues that keep history (one with a dead-letter queue), messages with and without their
    own delays, received after varied waits; some deleted at once, some after a retry, some dead."""
    clock, rng = FakeClock(START), random.Random(35)
    with durableq.open(path, clock=clock, durability="normal") as broker:
        broker.create_queue("orders-dlq", history=True)
        orders = broker.create_queue("orders", history=True, redrive_policy=RedrivePolicy("orders-dlq", 2))
        mail = broker.create_queue("mail", history=True, delay_seconds=3)
        dlq = broker.get_queue("orders-dlq")
        for minute in range(8):
            for queue in (orders, mail):
                entries = [
                    SendEntry(str(n), f"{minute}-{n}", delay_seconds=rng.choice((None, 0, 5, 40)))
                    for n in range(10)
                ]
                assert not queue.send_batch(entries).failed
                clock.advance(rng.uniform(0.5, 9))
            for _ in range(3):
                for queue in (orders, mail, dlq):
                    for message in queue.receive(10, visibility_timeout=20):
                        clock.advance(rng.uniform(0, 2))
                        if rng.random() < 0.7:
                            queue.delete(message.receipt_handle)
                clock.advance(rng.uniform(5, 25))
    return clock


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FakeClock]:
    path = tmp_path_factory.mktemp("metrics") / "metrics.db"
    return path, _traffic(path)


@pytest.fixture(scope="module")
def events(traffic: tuple[Path, FakeClock]) -> Events:
    path, clock = traffic
    with durableq.open(path, clock=clock, durability="normal") as broker:
        found = broker.message_events(limit=100_000)
    assert found and len(found) < 100_000
    return found


@pytest.fixture(scope="module")
def window(events: Events) -> tuple[datetime, datetime]:
    """The middle of the traffic: messages sent before it are deleted in it."""
    return events[len(events) // 3].at, events[2 * len(events) // 3].at


Key = tuple[str, bool, bool]  # report, exact, completed in the window


@pytest.fixture(scope="module")
def spark_report(
    spark: SparkSession, traffic: tuple[Path, FakeClock], window: tuple[datetime, datetime]
) -> Iterator[Callable[[Key], list[dict[str, Any]]]]:
    """A report's rows from Spark over the window, each computed once (Spark's queries are the slow
    part: the tests share them)."""
    path, clock = traffic
    since, until = window
    with QueueAnalytics.open(path, spark=spark, clock=clock, since=since, until=until) as windowed:
        cache: dict[Key, list[dict[str, Any]]] = {}

        def rows(key: Key) -> list[dict[str, Any]]:
            name, exact, completed = key
            if key not in cache:
                cache[key] = to_rows(windowed.report(name, exact=exact, completed_in_window=completed))
            return cache[key]

        yield rows


def _ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


def _linear(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


def _check(row: dict[str, Any], values: list[float], *, exact: bool) -> None:
    assert row["messages"] == len(values)
    assert row["max"] == max(values)
    for fraction in PERCENTILES:
        got = row[f"p{round(fraction * 100)}"]
        if exact:
            assert math.isclose(got, _linear(values, fraction), abs_tol=1e-9), fraction
        else:
            low, high = reference.rank_window(values, fraction, ACCURACY)
            assert low <= got <= high and got in values, fraction


def _expected_waits(
    events: Events, since: int | None, until: int | None, completed: bool
) -> dict[Any, list[float]]:
    """(queue, measured_from) -> seconds, in plain Python."""
    sent: dict[tuple[str, str], tuple[int, int | None]] = {}
    first: dict[tuple[str, str], int] = {}
    for e in events:
        at, key = _ms(e.at), (e.queue, e.message_id)
        if (until is not None and at >= until) or (not completed and since is not None and at < since):
            continue
        if e.event == history.SENT:
            sent[key] = (at, None if e.visible_at is None else _ms(e.visible_at))
        elif e.event == history.RECEIVED and key not in first:
            first[key] = at
    waits: dict[Any, list[float]] = defaultdict(list)
    for key, received in first.items():
        if key not in sent or (completed and since is not None and received < since):
            continue
        at, visible = sent[key]
        waits[(key[0], "sent")].append((received - at) / 1000)
        if visible is not None:
            waits[(key[0], "visible")].append((received - visible) / 1000)
    return waits


def test_wait_sent_and_visible_with_p95_approximate_and_exact(
    spark_report: Callable[[Key], list[dict[str, Any]]], events: Events, window: tuple[datetime, datetime]
) -> None:
    since, until = (_ms(t) for t in window)
    expected = _expected_waits(events, since, until, completed=False)
    for exact in (False, True):
        rows = spark_report(("wait", exact, False))
        assert [(r["queue"], r["measured_from"]) for r in rows] == sorted(expected)
        for row in rows:
            _check(row, expected[(row["queue"], row["measured_from"])], exact=exact)
    # The delays tell the two apart: waiting since the send includes the delay, since visible does not.
    assert max(expected[("orders", "sent")]) > max(expected[("orders", "visible")])
    assert min(expected[("mail", "visible")]) >= 0 and min(expected[("mail", "sent")]) >= 3
    assert "orders-dlq" not in {queue for queue, _ in expected}  # its messages were never sent there


def test_completed_in_the_window_counts_messages_sent_before_it(
    spark_report: Callable[[Key], list[dict[str, Any]]], events: Events, window: tuple[datetime, datetime]
) -> None:
    since, until = (_ms(t) for t in window)
    lives: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for e in events:
        lives[(e.queue, e.message_id)][e.event].append(_ms(e.at))
    counted = {}
    for completed in (False, True):
        expected: dict[str, list[float]] = defaultdict(list)
        for (queue, _), times in lives.items():
            if not times.get(history.DELETED) or not times.get(history.SENT):
                continue
            sent, deleted = max(times[history.SENT]), max(times[history.DELETED])
            if since <= deleted < until and (completed or since <= sent):
                expected[queue].append((deleted - sent) / 1000)
        rows = spark_report(("latency", False, completed))
        assert [r["queue"] for r in rows] == sorted(expected)
        for row in rows:
            _check(row, expected[row["queue"]], exact=False)
        counted[completed] = sum(r["messages"] for r in rows)
    assert counted[True] > counted[False] > 0  # the messages sent before the window count
    waits = _expected_waits(events, since, until, completed=True)
    for row in spark_report(("wait", True, True)):
        _check(row, waits[(row["queue"], row["measured_from"])], exact=True)


#: The Spark reports the Arrow ones are compared with (those above, and one mode of the others).
_COMPARED: tuple[Key, ...] = (
    ("wait", False, False),
    ("wait", True, False),
    ("wait", True, True),
    ("latency", False, False),
    ("latency", False, True),
    ("processing", True, True),
    ("retries", False, True),
)


def test_arrow_reports_equal_spark_s(
    spark_report: Callable[[Key], list[dict[str, Any]]],
    traffic: tuple[Path, FakeClock],
    window: tuple[datetime, datetime],
) -> None:
    """Same rows, numbers and types, without Spark, in every mode: approximate or exact, completed
    in the window or not."""
    path, clock = traffic
    since, until = window
    assert {name for name, *_ in _COMPARED} == set(arrow.REPORTS)
    with durableq.open(path, clock=clock, durability="normal") as broker:
        for key in _COMPARED:
            name, exact, completed = key
            table = arrow.report(
                broker, name, since=since, until=until, exact=exact, completed_in_window=completed
            )
            assert table.to_pylist() == spark_report(key) and table.num_rows > 0, key
