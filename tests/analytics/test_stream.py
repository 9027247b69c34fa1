"""The ``durableq-events`` Structured Streaming source: every event of the queues that keep history,
once, across a restart from the query's checkpoint, in micro-batches of at most maxEventsPerBatch."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq.analytics import EVENT_STREAM_FORMAT, EVENTS_SCHEMA, register_event_stream
from durableq.analytics.stream import _Reader
from tests.conftest import sql_rows
from tests.held import Held


def _library_events(path: Path) -> list[tuple[int, str, str, str, int]]:
    with durableq.open(path) as broker:
        return [
            (e.event_id, e.queue, e.event, e.message_id, e.receive_count)
            for e in broker.message_events(limit=100_000)
        ]


def test_the_stream_delivers_every_event_once_across_a_restart(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    with durableq.open(path) as broker:
        jobs = broker.create_queue("jobs", history=True)
        for i in range(7):
            jobs.send(str(i))
        broker.create_queue("plain").send("no history")
    register_event_stream(spark)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> int:
        stream = (
            spark.readStream.format(EVENT_STREAM_FORMAT)
            .option("path", str(path))
            .option("maxEventsPerBatch", 3)
            .load()
        )
        query = (
            stream.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            query.processAllAvailable()
            return len(query.recentProgress)
        finally:
            query.stop()

    def exported() -> list[tuple[int, str, str, str, int]]:
        rows = spark.read.schema(EVENTS_SCHEMA).parquet(str(out)).collect()
        return sorted((r.event_id, r.queue, r.event, r.message_id, r.receive_count) for r in rows)

    assert stream_schema_is_events(spark, path)
    assert run() >= 3  # 7 events in batches of at most 3
    assert exported() == _library_events(path)
    with durableq.open(path) as broker:
        jobs = broker.get_queue("jobs")
        for message in jobs.receive(10):
            jobs.delete(message.receipt_handle)
    run()  # resumes after the checkpoint's offset
    events = exported()
    assert events == _library_events(path) and len(events) == 7 * 3
    assert len({e[0] for e in events}) == len(events)  # none twice


def stream_schema_is_events(spark: SparkSession, path: Path) -> bool:
    return bool(
        spark.readStream.format(EVENT_STREAM_FORMAT).option("path", str(path)).load().schema == EVENTS_SCHEMA
    )


def test_a_missing_file_is_refused_not_created(spark: SparkSession, tmp_path: Path) -> None:
    register_event_stream(spark)
    missing = tmp_path / "missing.db"
    query = (
        spark.readStream.format(EVENT_STREAM_FORMAT)
        .option("path", str(missing))
        .load()
        .writeStream.format("memory")
        .queryName("missing_events")
        .start()
    )
    with pytest.raises(Exception, match="not a file"):
        query.processAllAvailable()
    query.stop()
    assert not missing.exists()
    relative = spark.readStream.format(EVENT_STREAM_FORMAT).option("path", "queue.db").load()
    query = relative.writeStream.format("memory").queryName("relative_events").start()
    with pytest.raises(Exception, match="ABSOLUTE_PATH"):
        query.processAllAvailable()
    query.stop()


def test_on_postgresql_no_batch_ends_past_an_event_still_to_commit(pg_url: str) -> None:
    """The stream's calls, as Spark makes them for each micro-batch (the latest offset, then the
    range up to it): a later event id that commits before an earlier one is not handed out before
    it, so resuming from the offset misses nothing.  (A held send, see tests/held.py.)"""
    with durableq.open(pg_url, durability="normal", busy_timeout=60) as broker:
        jobs = broker.create_queue("jobs", history=True)
        reader = _Reader(pg_url, 100)
        offsets = [{"event_id": 0}]
        rows: list[tuple[object, ...]] = []

        def batch() -> None:
            offsets.append(reader.latestOffset(offsets[-1]))
            (partition,) = reader.partitions(offsets[-2], offsets[-1])
            rows.extend(reader.read(partition))

        with Held(pg_url, jobs) as held:
            jobs.send("quick")  # a higher id than the held send's, committed first
            first = threading.Thread(target=batch)
            first.start()
            held.reader_waits_or_is_done(first)
        first.join(60)
        batch()  # the next micro-batch resumes from the first one's offset
        committed = [
            row[0]
            for row in sql_rows(pg_url, "SELECT event_id FROM durableq_message_events ORDER BY event_id")
        ]
    assert len(committed) == 2 and [row[0] for row in rows] == committed
