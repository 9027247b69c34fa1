"""``export_events``: each run appends exactly the events written since the last, and a run that
crashed at any step is repaired by the next (no event twice, none missing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq.analytics import export_events, read_export, to_rows
from durableq.analytics.incremental import CHECKPOINT, STAGING
from durableq.errors import InvalidParameterValue
from tests.conftest import FakeClock

from . import history_traffic
from .scenario import START


class Crash(Exception):
    """Stands for a kill: the export does no cleanup on the way out, so the files are left as a
    killed process leaves them (the snapshot copy aside, which lives elsewhere)."""


def crash_at(step: str, occurrence: int = 1) -> Callable[[str], None]:
    seen = []

    def hook(name: str) -> None:
        if name == step:
            seen.append(name)
            if len(seen) == occurrence:
                raise Crash(step)

    return hook


def exported(spark: SparkSession, out: Path) -> tuple[list[int], list[int]]:
    events = to_rows(read_export(spark, out / "events"))
    audit = to_rows(read_export(spark, out / "audit", "audit"))
    for row in events:  # partitioned by queue and the UTC date of at
        assert row["date"] == row["at"].date()
    return sorted(r["event_id"] for r in events), sorted(r["event_id"] for r in audit)


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
    assert [r["rows"] for r in again] == [0, 0]
    history_traffic.traffic(path, clock, 1)
    clock.advance(86_400)  # a new day: a new date partition
    history_traffic.traffic(path, clock, 2)
    second = export_events(path, out, spark=spark, clock=clock)
    events, audit = library(path, clock)
    assert exported(spark, out) == (events, audit)
    assert second[0]["rows"] == len(events) - first[0]["rows"] and second[0]["checkpoint"] == events[-1]
    assert json.loads((out / "events" / CHECKPOINT).read_text())["last_event_id"] == events[-1]
    dates = {p.name for p in (out / "events" / "queue=jobs").iterdir()}
    assert len(dates) == 2 and all(d.startswith("date=2106-") for d in dates)
    assert not (out / "events" / STAGING).exists()


@pytest.mark.parametrize(
    ("step", "occurrence"),
    [("staged", 1), ("moved", 1), ("moved", 2), ("checkpoint", 1)],
    ids=["after-staging", "after-first-move", "after-second-move", "before-checkpoint"],
)
def test_a_crashed_run_is_repaired_by_the_next(
    spark: SparkSession, tmp_path: Path, step: str, occurrence: int
) -> None:
    path, out = tmp_path / "q.db", tmp_path / "out"
    clock = FakeClock(START)
    history_traffic.create(path, clock)
    history_traffic.traffic(path, clock, 0)
    export_events(path, out, spark=spark, clock=clock)
    before = exported(spark, out)
    history_traffic.traffic(path, clock, 1)
    with pytest.raises(Crash):
        export_events(path, out, spark=spark, clock=clock, hook=crash_at(step, occurrence))
    # The crashed run left its files (staged, or some moved in), and the old checkpoint.
    assert (out / "events" / STAGING).exists()
    if step != "staged":
        assert len(exported(spark, out)[0]) > len(before[0])
    history_traffic.traffic(path, clock, 2)
    export_events(path, out, spark=spark, clock=clock)
    assert exported(spark, out) == library(path, clock)


def test_refused_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterValue, match="tables"):
        export_events(tmp_path / "q.db", tmp_path / "out", tables=("messages",))
    with pytest.raises(InvalidParameterValue, match="local"):
        export_events(tmp_path / "q.db", "s3a://bucket/out")
