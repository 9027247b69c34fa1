"""The snapshot: consistent while another process writes, unchanged while read, removed on close."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import durableq
from durableq import limits
from durableq.analytics import AnalyticsError, QueueAnalytics, to_rows
from durableq.errors import DatabaseError, NotADurableQDatabase

from . import reference, scenario

ROOT = Path(__file__).resolve().parents[2]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A separate process writing to ``tmp_path/live.db``; it has done 20 rounds when this yields."""
    path, stop = tmp_path / "live.db", tmp_path / "stop"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.analytics.writer", str(path), str(stop)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "20"
        yield path, process
    finally:
        stop.touch()
        process.wait(timeout=60)


def test_snapshot_is_one_consistent_state_while_a_writer_runs(
    spark: SparkSession, writer: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    path, process = writer
    assert process.stdout is not None
    with QueueAnalytics.open(path, spark=spark, partitions=4, snapshot_dir=tmp_path) as analytics:
        before = digest(analytics.snapshot_path)
        assert process.stdout.readline().strip()  # the writer went on after the copy
        fifo = analytics.messages().where(F.col("queue") == "stream.fifo")
        (row,) = fifo.agg(F.count(F.lit(1)).alias("n"), F.max("sequence").alias("last")).collect()
        rounds = fifo.groupBy(F.split("deduplication_id", "-")[0].alias("round")).count()
        sizes = {r["count"] for r in rounds.collect()}
        depth = {r["queue"]: r["total"] for r in to_rows(analytics.depth_by_state())}
        with reference.connect_ro(analytics.snapshot_path) as conn:
            (next_sequence,) = conn.execute(
                "SELECT next_sequence FROM durableq_queues WHERE name = 'stream.fifo'"
            ).fetchone()
            (stream_rows,) = conn.execute(
                "SELECT count(*) FROM durableq_messages "
                "WHERE queue_id = (SELECT id FROM durableq_queues WHERE name = 'stream')"
            ).fetchone()
        # Every partition saw the same committed state: whole batches only, and the
        # queue row's sequence counter agrees with the messages (they commit together).
        assert sizes == {10}
        assert row["n"] == row["last"] == next_sequence >= 200
        assert depth == {"stream": stream_rows, "stream.fifo": next_sequence}
        # Nothing wrote to the copy while Spark read it, and no journal appeared beside it.
        assert digest(analytics.snapshot_path) == before
        assert sorted(p.name for p in analytics.snapshot_path.parent.iterdir()) == ["snapshot.db"]
    with reference.connect_ro(path) as conn:
        (live_rows,) = conn.execute("SELECT count(*) FROM durableq_messages").fetchone()
    assert live_rows > stream_rows + next_sequence  # the file moved on; the snapshot did not


def test_close_removes_the_snapshot(spark: SparkSession, world: scenario.Scenario, tmp_path: Path) -> None:
    analytics = QueueAnalytics.open(world.path, spark=spark, clock=world.clock, snapshot_dir=tmp_path)
    with analytics:
        assert analytics.snapshot_path.is_file()
        assert analytics.taken_at == durableq.types.datetime_from_ms(int(world.clock() * 1000))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(AnalyticsError, match="closed"):
        analytics.messages()
    # The session was given, so it keeps running.
    assert spark.range(3).count() == 3


def test_a_missing_file_is_not_created(spark: SparkSession, tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(DatabaseError, match="does not exist"):
        QueueAnalytics.open(missing, spark=spark, snapshot_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_another_application_s_file_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    with pytest.raises(NotADurableQDatabase):
        QueueAnalytics.open(other, spark=spark, snapshot_dir=snapshots)
    assert list(snapshots.iterdir()) == []


def test_without_a_session_the_active_one_is_reused_and_left_running(
    spark: SparkSession, world: scenario.Scenario
) -> None:
    with QueueAnalytics.open(world.path, clock=world.clock) as analytics:
        assert analytics.spark is spark
        assert analytics.depth_by_state().count() == len(scenario.QUEUE_NAMES)
    assert spark.range(2).count() == 2


def test_a_file_without_messages_reads_as_empty_frames(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    with durableq.open(path, durability="normal") as broker:
        broker.create_queue("waiting")
    with QueueAnalytics.open(path, spark=spark) as analytics:
        assert analytics.messages().rdd.getNumPartitions() == 1
        assert analytics.messages().count() == 0
        assert to_rows(analytics.depth_by_state()) == [
            {"queue": "waiting", "delayed": 0, "visible": 0, "in_flight": 0, "total": 0}
        ]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_given_snapshot_dir_lets_other_users_open_the_copy_by_name(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path
) -> None:
    with QueueAnalytics.open(world.path, spark=spark, clock=world.clock, snapshot_dir=tmp_path) as analytics:
        copy = analytics.snapshot_path
        run = copy.parent.parent  # the run's folder (see durableq.analytics.scratch)
        assert run.parent == tmp_path
        # Others may enter the folders (not list them) and read the copy; the folder given decides who may.
        assert mode(run) == mode(copy.parent) == limits.SNAPSHOT_SHARED_DIR_MODE == 0o711
        assert mode(copy) == limits.SNAPSHOT_FILE_MODE == 0o444


def test_without_a_snapshot_dir_the_copy_is_private(spark: SparkSession, world: scenario.Scenario) -> None:
    with QueueAnalytics.open(world.path, spark=spark, clock=world.clock) as analytics:
        assert mode(analytics.snapshot_path.parent.parent) == 0o700  # the run's folder


def test_a_missing_snapshot_dir_is_an_error(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path
) -> None:
    with pytest.raises(AnalyticsError, match="does not exist"):
        QueueAnalytics.open(world.path, spark=spark, snapshot_dir=tmp_path / "nowhere")
    assert list(tmp_path.iterdir()) == []
