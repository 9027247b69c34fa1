"""The calls the CLI makes: run_report (with its plot) and export_parquet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest
from matplotlib.image import imread
from pyspark.sql import SparkSession

import durableq
from durableq import RedrivePolicy
from durableq.analytics import (
    EXPORTED_TABLES,
    REPORT_NAMES,
    AnalyticsError,
    export_parquet,
    run_report,
    to_rows,
    write_activity_png,
)
from durableq.analytics.plot import DPI, figure_size
from durableq.errors import InvalidParameterValue
from tests.conftest import FakeClock

from . import reference, scenario
from .scenario import send


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FakeClock]]:
    """A small file over four minutes: sends, receives, deletes and dead letters."""
    path = tmp_path_factory.mktemp("small") / "small.db"
    clock = FakeClock(scenario.START)
    with durableq.open(path, clock=clock, durability="normal") as broker:
        broker.create_queue("jobs-dlq")
        jobs = broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 1))
        send(jobs, 100)
        clock.advance(1)
        for _ in range(10):
            jobs.receive(10, visibility_timeout=0)
        clock.advance(60)
        send(jobs, 200, "-more")
        clock.advance(60)
        # The first receive moves the 100 received once to jobs-dlq, then claims new ones.
        for _ in range(5):
            for message in jobs.receive(10):
                jobs.delete(message.receipt_handle)
        clock.advance(60)
        send(jobs, 50, "-late")
        clock.advance(1)
    yield path, clock


def test_run_report_returns_every_report_as_plain_rows(
    spark: SparkSession, small: tuple[Path, FakeClock], tmp_path: Path
) -> None:
    path, clock = small
    plot = tmp_path / "activity.png"
    result = run_report(path, spark=spark, clock=clock, plot=plot)
    assert list(result) == ["snapshot", *REPORT_NAMES]
    taken_at = durableq.types.datetime_from_ms(int(clock() * 1000))
    assert result["snapshot"] == [{"source": str(path), "taken_at": taken_at}]
    json.dumps(result, default=str)  # ready for --json
    with durableq.open(path, clock=clock, durability="normal") as broker:
        jobs, dlq = broker.get_queue("jobs"), broker.get_queue("jobs-dlq")
        metrics = jobs.metrics()
        stats = {"jobs": jobs.stats(), "jobs-dlq": dlq.stats()}
    depth = {r["queue"]: (r["visible"], r["in_flight"], r["delayed"]) for r in result["depth"]}
    assert depth == {
        name: (
            s.approximate_number_of_messages,
            s.approximate_number_of_messages_not_visible,
            s.approximate_number_of_messages_delayed,
        )
        for name, s in stats.items()
    }
    (rate,) = result["dead-letters"]
    moved = sum(m.moved_to_dead_letter for m in metrics)
    assert rate["moved_to_dead_letter"] == moved == stats["jobs-dlq"].approximate_number_of_messages == 100
    jobs = [r for r in result["throughput"] if r["queue"] == "jobs"]
    jobs_minutes = [(r["minute"], r["sent"], r["received"], r["deleted"]) for r in jobs]
    assert jobs_minutes == [(m.minute, m.sent, m.received, m.deleted) for m in metrics]
    assert all(r["minute"].tzinfo is UTC for r in result["throughput"])
    # The plot: a PNG of the configured size with something drawn on it.
    image = imread(plot)
    width, height = figure_size(2)
    assert image.shape[:2] == (round(height * DPI), round(width * DPI))
    assert image.min() < image.max()


def test_run_report_one_report_for_one_queue(spark: SparkSession, small: tuple[Path, FakeClock]) -> None:
    path, clock = small
    result = run_report(path, "receive-counts", queue="jobs", spark=spark, clock=clock)
    assert list(result) == ["snapshot", "receive-counts"]
    with reference.connect_ro(path) as conn:
        expected = dict(
            conn.execute(
                "SELECT receive_count, count(*) FROM durableq_messages "
                "WHERE queue_id = (SELECT id FROM durableq_queues "
                "WHERE name = 'jobs') GROUP BY receive_count ORDER BY receive_count"
            )
        )
    assert {r["receive_count"]: r["messages"] for r in result["receive-counts"]} == expected
    assert {r["queue"] for r in result["receive-counts"]} == {"jobs"}


def test_run_report_refuses_an_unknown_report_before_reading(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterValue, match="throughput"):
        run_report(tmp_path / "never-read.db", "nope")


def test_export_parquet_writes_the_tables_for_a_cluster(
    spark: SparkSession, small: tuple[Path, FakeClock], tmp_path: Path
) -> None:
    path, clock = small
    out = tmp_path / "export"
    written = export_parquet(path, out, spark=spark, clock=clock)
    assert [w["table"] for w in written] == list(EXPORTED_TABLES)
    rows = {w["table"]: w["rows"] for w in written}
    with reference.connect_ro(path) as conn:
        stored = dict(conn.execute("SELECT message_id, enqueued_at FROM durableq_messages"))
        (queues,) = conn.execute("SELECT count(*) FROM durableq_queues").fetchone()
        (minutes,) = conn.execute("SELECT count(*) FROM durableq_queue_metrics").fetchone()
    assert rows == {"messages": len(stored), "queues": queues, "metrics": minutes, "snapshot": 1}
    messages = to_rows(spark.read.parquet(str(out / "messages")))
    assert {m["message_id"]: m["sent_at"] for m in messages} == {
        k: durableq.types.datetime_from_ms(v) for k, v in stored.items()
    }
    assert to_rows(spark.read.parquet(str(out / "snapshot")))[0]["source"] == str(path)
    with pytest.raises(AnalyticsError, match="already exist"):
        export_parquet(path, out, spark=spark, clock=clock)
    assert export_parquet(path, out, spark=spark, clock=clock, overwrite=True) == written


def test_the_plot_of_no_activity_is_still_a_picture(tmp_path: Path) -> None:
    target = write_activity_png([], tmp_path / "empty.png")
    width, height = figure_size(0)
    assert imread(target).shape[:2] == (round(height * DPI), round(width * DPI))
