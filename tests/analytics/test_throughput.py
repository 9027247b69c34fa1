"""The throughput report's depth against the depth the library reported minute by minute, through
dead letters, message move tasks out of the dead-letter queue, a purge, and a time window."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq import RedrivePolicy
from durableq.analytics import QueueAnalytics, run_report, to_rows
from durableq.types import datetime_from_ms
from tests.conftest import FakeClock

from . import scenario
from .scenario import send

MINUTE = timedelta(minutes=1)
#: The start of the minute the fake clock starts in.
FIRST_MINUTE = datetime_from_ms(int(scenario.START * 1000) // 60_000 * 60_000)


@dataclass
class Moved:
    path: Path
    clock: FakeClock
    #: The depth stats() gave for each queue at the end of each minute.
    depth: dict[tuple[str, datetime], int]


def finish(broker: durableq.Broker, task: durableq.MoveTask) -> None:
    broker.wait_for_message_move(task.task_handle, timeout=60)
    (done, *_) = broker.list_message_moves(task.source)
    assert (done.task_handle, done.status) == (task.task_handle, "COMPLETED")


def total(queue: durableq.Queue) -> int:
    s = queue.stats()
    return (
        s.approximate_number_of_messages
        + s.approximate_number_of_messages_not_visible
        + s.approximate_number_of_messages_delayed
    )


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moved]:
    path = tmp_path_factory.mktemp("moved") / "moved.db"
    clock = FakeClock(scenario.START)
    depth: dict[tuple[str, datetime], int] = {}
    with durableq.open(path, clock=clock, durability="normal") as broker:
        dlq = broker.create_queue("jobs-dlq")
        jobs = broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 1))

        def minute_ends() -> None:
            minute = datetime_from_ms(int(clock() * 1000) // 60_000 * 60_000)
            depth.update({(q.name, minute): total(q) for q in (jobs, dlq)})
            clock.advance(60)

        # Minute 0: 50 jobs, each received once and released; 5 messages sent to the DLQ directly.
        send(jobs, 50)
        send(dlq, 5, "-direct")
        for _ in range(5):
            jobs.receive(10, visibility_timeout=0)
        minute_ends()
        # Minute 1: the next receive moves the 50 to the dead-letter queue; 10 new jobs.
        assert jobs.receive(10) == []
        send(jobs, 10, "-new")
        minute_ends()
        # Minute 2: a message move task sends all 55 to jobs.
        finish(broker, broker.start_message_move("jobs-dlq", "jobs"))
        minute_ends()
        # Minute 3: 30 jobs done.
        for _ in range(3):
            assert not jobs.delete_batch([m.receipt_handle for m in jobs.receive(10)]).failed
        minute_ends()
        # Minute 4: 20 jobs received once and released.
        for _ in range(2):
            assert len(jobs.receive(10, visibility_timeout=0)) == 10
        minute_ends()
        # Minute 5: they go to the dead-letter queue, and a task sends them back where they came from.
        while jobs.receive(10, visibility_timeout=600):
            pass
        assert total(dlq) == 20
        finish(broker, broker.start_message_move("jobs-dlq"))
        minute_ends()
        # Minute 6: two new messages in the dead-letter queue; jobs is purged.
        send(dlq, 2, "-late")
        jobs.purge()
        minute_ends()
    yield Moved(path, clock, depth)


def test_depth_follows_a_message_move_task(spark: SparkSession, moved: Moved) -> None:
    rows = run_report(moved.path, "throughput", spark=spark, clock=moved.clock)["throughput"]
    got = {(r["queue"], r["minute"]): r["depth"] for r in rows}
    assert got == {key: moved.depth[key] for key in got}
    assert min(got.values()) >= 0
    start = FIRST_MINUTE
    # Every minute with a change of either queue is there, moves included.
    assert set(got) == {(q, start + n * MINUTE) for q in ("jobs", "jobs-dlq") for n in range(7)} - {
        ("jobs-dlq", start + 3 * MINUTE),
        ("jobs-dlq", start + 4 * MINUTE),
    }
    by_minute = {(r["queue"], (r["minute"] - start) // MINUTE): r for r in rows}
    for minute, count in ((2, 55), (5, 20)):
        assert (
            by_minute[("jobs-dlq", minute)]["moved_out"] == by_minute[("jobs", minute)]["moved_in"] == count
        )
    assert moved.depth[("jobs-dlq", start + MINUTE)] == 55
    assert moved.depth[("jobs-dlq", start + 2 * MINUTE)] == 0
    # Dead letters arrive as moved_in of the dead-letter queue; the purge takes what jobs held.
    assert by_minute[("jobs-dlq", 1)]["moved_in"] == by_minute[("jobs", 1)]["moved_to_dead_letter"] == 50
    assert by_minute[("jobs", 6)]["purged"] == moved.depth[("jobs", start + 5 * MINUTE)] > 0
    assert moved.depth[("jobs", start + 6 * MINUTE)] == 0


def test_a_window_keeps_its_minutes_and_their_true_depth(spark: SparkSession, moved: Moved) -> None:
    start = FIRST_MINUTE
    everything = run_report(moved.path, "throughput", spark=spark, clock=moved.clock)["throughput"]
    since, until = start + MINUTE + timedelta(seconds=30), start + 3 * MINUTE
    windowed = run_report(moved.path, "throughput", spark=spark, clock=moved.clock, since=since, until=until)[
        "throughput"
    ]
    # The minute that holds `since` overlaps the window; `until` is excluded.
    expected = [r for r in everything if start + MINUTE <= r["minute"] < until]
    assert windowed == expected and {r["minute"] for r in expected} == {start + MINUTE, start + 2 * MINUTE}


def test_nothing_after_the_snapshot_time(spark: SparkSession, moved: Moved) -> None:
    early = FakeClock(scenario.START + 130)  # in minute 2, after the first move task
    with QueueAnalytics.open(moved.path, spark=spark, clock=early) as analytics:
        counted = {r["minute"] for r in to_rows(analytics.metrics())}
        reported = {r["minute"] for r in to_rows(analytics.throughput())}
    start = FIRST_MINUTE
    # Minute 2 (its first move task came before the snapshot time) is in; minutes 3-6 are left out.
    assert counted == reported == {start, start + MINUTE, start + 2 * MINUTE}
