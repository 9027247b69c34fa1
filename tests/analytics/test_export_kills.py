"""The incremental export killed (SIGKILL of its process) mid-run: a Spark reader of the export never
sees a file of the unfinished batch, and a downstream Spark file-stream reader gets every event of
the events table exactly once across the kill and the next run.  One kill here (a JVM start costs
~15 s); every kill point, many rounds: ``python -m tests.reliability.export_kills``."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from pyspark.sql import SparkSession

from durableq.analytics import committed_files, export_events, scratch
from durableq.analytics.incremental import committed_offset
from tests.conftest import FakeClock

from . import history_traffic
from .export_kills import MOMENTS, StreamReader, batch_read, library_ids, run_and_kill
from .scenario import START


def test_a_killed_export_is_invisible_and_the_next_run_completes_it_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    db, out = tmp_path / "q.db", tmp_path / "out"
    clock = FakeClock(START)
    history_traffic.create(db, clock)
    history_traffic.traffic(db, clock, 0)
    reader = StreamReader(spark, out, tmp_path)
    killed = run_and_kill(db, out, 40, MOMENTS["batch-planned"])
    assert killed.seen  # killed mid-run: batch 0 committed, batch 1 under way
    committed = committed_offset(out / "events")
    ids = library_ids(db)
    assert 0 < committed < ids[-1]
    # A file of the unfinished batch (as a kill between writing and committing leaves one) is not read.
    listed = committed_files(out / "events")
    shutil.copy(listed[0], listed[0].with_name("part-99999-killed.c000.snappy.parquet"))
    assert batch_read(spark, out) == [i for i in ids if i <= committed]
    reader.read()
    assert sorted(reader.ids) == [i for i in ids if i <= committed]
    # More traffic, and the next run: it replays the planned batch and goes on to the newest event.
    history_traffic.traffic(db, clock, 1)
    export_events(db, out, spark=spark, tables=("events",))
    reader.read()
    ids = library_ids(db)
    assert batch_read(spark, out) == ids
    assert Counter(reader.ids) == Counter(ids)  # each once, across the kill
    # The killed run's Spark scratch files: in its run folder, which the next run's sweep removes.
    (left,) = (tmp_path / "tmp").glob(f"{scratch.PREFIX}*")
    assert any(left.glob("blockmgr-*"))
    assert scratch.sweep(tmp_path / "tmp") == [left] and not left.exists()
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing else was left there
