"""``export_events``: each run appends exactly the events written since the last, as committed
batches of Spark's file sink (no file rewritten).  Runs killed at any moment: test_export_kills.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq.analytics import AnalyticsError, export_events, read_export, to_rows
from durableq.analytics.incremental import LEGACY_CHECKPOINT, committed_files, committed_offset
from durableq.errors import InvalidParameterValue
from tests.conftest import FakeClock

from . import history_traffic
from .scenario import START


def exported(spark: SparkSession, out: Path) -> tuple[list[int], list[int]]:
    events = to_rows(read_export(spark, out / "events"))
    audit = to_rows(read_export(spark, out / "audit", "audit"))
    for row in events:  # partitioned by queue and the UTC date of at
        assert row["date"] == row["at"].date()
    return sorted(r["event_id"] for r in events), sorted(r["event_id"] for r in audit)


def parquet_files(folder: Path) -> list[Path]:
    return [f for f in folder.rglob("*.parquet") if "_" not in f.relative_to(folder).parts[0][:1]]


def library(path: Path, clock: FakeClock) -> tuple[list[int], list[int]]:
    events = [e.event_id for e in history_traffic.library_events(path, clock)]
    with durableq.open(path, clock=clock, durability="normal") as broker:
        audit = [a.event_id for a in broker.audit(limit=100_000)]
    return events, audit


def test_runs_append_exactly_the_new_events(spark: SparkSession, tmp_path: Path) -> None:
    path, out = tmp_path / "q.db", tmp_path / "out"
    clock = FakeClock(START)
    history_traffic.create(path, clock)
    history_traffic.traffic(path, clock, 0)
    first = export_events(path, out, spark=spark, clock=clock)
    events, audit = library(path, clock)
    assert [(r["table"], r["rows"], r["checkpoint"]) for r in first] == [
        ("events", len(events), events[-1]),
        ("audit", len(audit), audit[-1]),
    ]
    assert exported(spark, out) == (events, audit)
    # Nothing new: nothing written, the checkpoints stay.
    again = export_events(path, out, spark=spark, clock=clock)
    assert [(r["rows"], r["checkpoint"]) for r in again] == [(0, events[-1]), (0, audit[-1])]
    before = {f: f.stat().st_size for f in parquet_files(out / "events")}
    history_traffic.traffic(path, clock, 1)
    clock.advance(86_400)  # a new day: a new date partition
    history_traffic.traffic(path, clock, 2)
    second = export_events(path, out, spark=spark, clock=clock)
    events, audit = library(path, clock)
    assert exported(spark, out) == (events, audit)
    after = {f: f.stat().st_size for f in parquet_files(out / "events")}
    assert second[0]["rows"] == len(events) - first[0]["rows"] and second[0]["checkpoint"] == events[-1]
    assert committed_offset(out / "events") == events[-1]
    dates = {p.name for p in (out / "events" / "queue=jobs").iterdir()}
    assert len(dates) == 2 and all(d.startswith("date=2106-") for d in dates)
    # The first run's files are there as they were: a later run adds files, never rewrites one.
    assert all(after[f] == size for f, size in before.items())
    assert set(committed_files(out / "events")) == set(parquet_files(out / "events"))


def test_refused_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterValue, match="tables"):
        export_events(tmp_path / "q.db", tmp_path / "out", tables=("messages",))
    with pytest.raises(InvalidParameterValue, match="local"):
        export_events(tmp_path / "q.db", "s3a://bucket/out")


def test_an_export_of_the_earlier_layout_is_refused_untouched(tmp_path: Path) -> None:
    path, out = tmp_path / "q.db", tmp_path / "out"
    history_traffic.create(path, FakeClock(START))
    legacy = out / "events"
    legacy.mkdir(parents=True)
    (legacy / LEGACY_CHECKPOINT).write_text('{"last_event_id": 3}')
    with pytest.raises(AnalyticsError, match="new folder"):
        export_events(path, out, tables=("events",))
    assert sorted(p.name for p in legacy.iterdir()) == [LEGACY_CHECKPOINT]


def test_a_missing_database_is_refused_before_spark(tmp_path: Path) -> None:
    with pytest.raises(durableq.NotADurableQDatabase):
        export_events(tmp_path / "missing.db", tmp_path / "out")
    assert not (tmp_path / "missing.db").exists() and not (tmp_path / "out").exists()
