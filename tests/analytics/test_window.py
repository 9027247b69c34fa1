"""``since``/``until`` and your own filters reach SQLite: Spark's plan shows them as pushed filters."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from durableq.analytics import QueueAnalytics, to_rows
from durableq.errors import InvalidParameterValue
from durableq.types import datetime_from_ms

from . import reference, scenario

START = datetime_from_ms(int(scenario.START * 1000))


def plan(spark: SparkSession, frame: DataFrame) -> str:
    frame.createOrReplaceTempView("durableq_plan_probe")
    # Untruncated: Spark shortens the scan's metadata (the pushed filters) to 100 characters.
    before = spark.conf.get("spark.sql.maxMetadataStringLength")
    spark.conf.set("spark.sql.maxMetadataStringLength", "100000")
    try:
        return str(spark.sql("EXPLAIN SELECT * FROM durableq_plan_probe").first()[0])
    finally:
        spark.conf.set("spark.sql.maxMetadataStringLength", before)


def pushed(spark: SparkSession, frame: DataFrame) -> list[str]:
    """The PushedFilters of every JDBC scan in the frame's physical plan."""
    return re.findall(r"PushedFilters: \[([^\]]*)\]", plan(spark, frame))


def test_since_and_until_are_pushed_to_sqlite(spark: SparkSession, world: scenario.Scenario) -> None:
    since, until = START + timedelta(minutes=1), START + timedelta(minutes=3)
    low, high = int(since.timestamp() * 1000), int(until.timestamp() * 1000)
    with QueueAnalytics.open(
        world.path, spark=spark, clock=world.clock, since=since, until=until
    ) as analytics:
        messages = analytics.messages()
        [filters] = pushed(spark, messages)
        assert f"GreaterThanOrEqual(enqueued_at,{low})" in filters
        assert f"LessThan(enqueued_at,{high})" in filters
        first_minute = low - low % 60_000  # the minute that holds `since` overlaps the window
        [minutes] = pushed(spark, analytics.metrics())
        assert (
            f"GreaterThanOrEqual(minute,{first_minute})" in minutes and f"LessThan(minute,{high})" in minutes
        )
        got = {r["message_id"] for r in to_rows(messages.select("message_id"))}
        stored = reference.live(reference.message_rows(analytics.snapshot_path), analytics.now_ms)
        expected = {r.message_id for r in stored if low <= r.enqueued_at < high}
        assert got == expected and 0 < len(got) < len(stored)
        # The reports see the same window: depth counts only messages sent in it.
        depth = sum(r["total"] for r in to_rows(analytics.depth_by_state()))
        assert depth == len(expected)
        # Counters of the minutes that overlap the window only.
        minutes = {r["minute"] for r in to_rows(analytics.metrics())}
        with reference.connect_ro(world.path) as conn:
            stored_minutes = {
                datetime_from_ms(m) for (m,) in conn.execute("SELECT minute FROM durableq_queue_metrics")
            }
        assert minutes == {m for m in stored_minutes if first_minute <= m.timestamp() * 1000 < high}
        assert len(minutes) == 3


def test_your_own_filters_reach_sqlite_too(spark: SparkSession, world: scenario.Scenario) -> None:
    with QueueAnalytics.open(world.path, spark=spark, clock=world.clock) as analytics:
        payments = analytics.messages().where((F.col("queue") == "payments") & (F.col("receive_count") >= 2))
        [filters] = pushed(spark, payments)
        assert "EqualTo(queue,payments)" in filters and "GreaterThanOrEqual(receive_count,2)" in filters
        assert "InMemory" not in plan(spark, payments)  # read from the file, not from a cache of everything
        assert payments.count() == scenario.PAYMENTS_SENT - scenario.PAYMENTS_MOVED


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        (START, START, "earlier than until"),
        (START + timedelta(minutes=1), START, "earlier than until"),
        (datetime(2106, 4, 6), None, "timezone-aware"),
        (None, "2106-04-06", "must be a datetime"),
    ],
)
def test_a_bad_window_is_refused_before_any_copy(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path, since: object, until: object, message: str
) -> None:
    with pytest.raises(InvalidParameterValue, match=message):
        QueueAnalytics.open(world.path, spark=spark, since=since, until=until, snapshot_dir=tmp_path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
