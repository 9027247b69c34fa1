"""Spark over a PostgreSQL database: the live tables through one exported snapshot (PostgreSQL's JDBC
driver), checked against what the library says, and held still while producers and consumers go on."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

import durableq
from durableq import RedrivePolicy, SendEntry
from durableq.analytics import QueueAnalytics, export_events, read_export, to_rows
from durableq.analytics.driver import POSTGRES, find_jdbc_jar
from durableq.analytics.session import add_jar
from durableq.engines import dialect
from tests.conftest import FakeClock, sql_rows, until
from tests.held import Held

START = 1_800_000_000.0


@pytest.fixture(scope="module")
def spark(spark: SparkSession) -> SparkSession:
    """The run's session, with PostgreSQL's JDBC driver added (as ``ADD JAR``: the JVM runs)."""
    add_jar(spark, find_jdbc_jar(driver=POSTGRES))
    return spark


@pytest.fixture
def world(pg_url: str) -> Iterator[tuple[str, FakeClock]]:
    """A small scenario on PostgreSQL: visible, delayed, in-flight and dead-lettered messages, a FIFO
    queue, and history."""
    clock = FakeClock(START)
    with durableq.open(pg_url, clock=clock, durability="normal") as broker:
        broker.create_queue("jobs-dlq")
        jobs = broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 1), history=True)
        for start in range(0, 300, 10):
            jobs.send_batch([SendEntry(str(i), f"job {start + i}") for i in range(10)])
        jobs.send("later", delay_seconds=600)
        clock.advance(60)
        held = jobs.receive(max_messages=10, visibility_timeout=3_600)  # in flight
        jobs.delete(held[0].receipt_handle)
        retry = broker.create_queue("retry", redrive_policy=RedrivePolicy("jobs-dlq", 1), history=True)
        retry.send_batch([SendEntry(str(i), f"retry {i}") for i in range(10)])
        assert len(retry.receive(max_messages=10, visibility_timeout=0)) == 10  # received once, released
        assert retry.receive(max_messages=10) == []  # the next receive moves all ten to jobs-dlq
        fifo = broker.create_queue("steps.fifo", fifo=True, content_based_deduplication=True)
        for group in range(3):
            fifo.send_batch([SendEntry(str(i), f"step {group}.{i}", group_id=f"g{group}") for i in range(5)])
        clock.advance(5)
    yield pg_url, clock


def _library(
    url: str, clock: FakeClock
) -> tuple[dict[str, durableq.QueueStats], Counter[str], dict[str, int]]:
    """The library's view: stats per queue, the history of retry, and each message's body size."""
    with durableq.open(url, clock=clock, durability="normal") as broker:
        queues = [broker.get_queue(name) for name in broker.list_queues()]
        events = Counter(e.event for e in broker.get_queue("retry").events(limit=10_000))
        sizes = {m.message_id: len((m.body or "").encode()) for q in queues for m in q.peek(limit=1_000)}
        return {q.name: q.stats() for q in queues}, events, sizes


def test_spark_reads_postgresql_through_its_jdbc_driver_and_matches_the_library(
    spark: SparkSession, world: tuple[str, FakeClock]
) -> None:
    url, clock = world
    with QueueAnalytics.open(url, spark=spark, clock=clock, partitions=3) as analytics:
        assert analytics._snapshot.dialect is dialect.POSTGRES and analytics.snapshot_path is None
        rows = to_rows(analytics.messages())
        depth = {r["queue"]: r for r in to_rows(analytics.report("depth"))}
        events = Counter(r["event"] for r in to_rows(analytics.events()) if r["queue"] == "retry")
    stats, library_events, sizes = _library(url, clock)
    assert (
        len(rows)
        == len({r["message_id"] for r in rows})
        == sum(
            s.approximate_number_of_messages
            + s.approximate_number_of_messages_not_visible
            + s.approximate_number_of_messages_delayed
            for s in stats.values()
        )
    )
    for name, s in stats.items():
        states = Counter(r["state"] for r in rows if r["queue"] == name)
        assert (states["visible"], states["in_flight"], states["delayed"]) == (
            s.approximate_number_of_messages,
            s.approximate_number_of_messages_not_visible,
            s.approximate_number_of_messages_delayed,
        ), name
        if s.approximate_number_of_messages:
            assert depth[name]["visible"] == s.approximate_number_of_messages
    moved = [r for r in rows if r["queue"] == "jobs-dlq"]
    assert len(moved) == 10 and {r["dead_letter_source"] for r in moved} == {"retry"}
    assert {r["message_id"]: r["body_bytes"] for r in rows} == sizes
    assert events == library_events and events["moved_to_dead_letter"] == 10


def test_the_snapshot_holds_still_while_producers_and_consumers_commit(
    spark: SparkSession, world: tuple[str, FakeClock]
) -> None:
    """Every partition, read after the writes below, sees the exported state and nothing newer."""
    url, clock = world
    with QueueAnalytics.open(url, spark=spark, clock=clock, partitions=4) as analytics:
        before = sorted(r["message_id"] for r in to_rows(analytics.messages()))
        with durableq.open(url, clock=clock, durability="normal") as broker:
            jobs = broker.get_queue("jobs")
            jobs.send_batch([SendEntry(str(i), f"new {i}") for i in range(10)])
            for message in jobs.receive(max_messages=10):
                jobs.delete(message.receipt_handle)
        after = sorted(r["message_id"] for r in to_rows(analytics.messages()))
        assert after == before  # a new read of the same snapshot, after the commits
    with QueueAnalytics.open(url, spark=spark, clock=clock) as fresh:
        assert sorted(r["message_id"] for r in to_rows(fresh.messages())) != before


def test_closing_ends_the_exporting_transaction(spark: SparkSession, world: tuple[str, FakeClock]) -> None:
    url, clock = world
    analytics = QueueAnalytics.open(url, spark=spark, clock=clock)
    snapshot = analytics._snapshot
    assert snapshot.dialect is dialect.POSTGRES and not snapshot.closed
    analytics.close()
    assert snapshot.closed

    def held() -> int:
        with psycopg.connect(url, autocommit=True) as other:
            row: Any = other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%'"
            ).fetchone()
        return int(row[0])

    # The client hangs up without waiting: the server ends the transaction when its backend gets to
    # the hang-up, a moment later on a busy machine (a run on two test workers saw it still there).
    # A transaction the close left open would stay, and fail this wait.
    until(lambda: held() == 0, "the exporting transaction has ended")


def test_a_database_without_durableq_tables_is_refused(spark: SparkSession, pg_cluster: Any) -> None:
    from tests import pgcluster

    name = pgcluster.create_database(pg_cluster)
    try:
        with pytest.raises(durableq.NotADurableQDatabase):
            QueueAnalytics.open(pg_cluster.url(name), spark=spark)
    finally:
        pgcluster.drop_database(pg_cluster, name)


def test_an_incremental_export_never_skips_an_event_that_commits_after_a_later_one(
    spark: SparkSession, pg_url: str, tmp_path: Path
) -> None:
    """An export's snapshot is settled: it waits for the writes under way, so its checkpoint (the
    highest id it saw) never passes an event still to commit.  (A held send, see tests/held.py.)"""
    out = tmp_path / "out"
    with durableq.open(pg_url, durability="normal", busy_timeout=60) as broker:
        jobs = broker.create_queue("jobs", history=True)
        jobs.send("before")
        with Held(pg_url, jobs) as held:
            jobs.send("quick")  # a higher id than the held send's, committed first
            # Spark is driven from this thread (its session's class loader holds the JDBC driver);
            # another lets the held send go once the export waits for it, or has ended.
            exported = threading.Event()
            releaser = threading.Thread(target=held.release_once, args=(exported.is_set,))
            releaser.start()
            try:
                export_events(pg_url, out, spark=spark, tables=("events",))
            finally:
                exported.set()
                releaser.join(300)
        export_events(pg_url, out, spark=spark, tables=("events",))  # the next run resumes after it
    committed = [
        row[0] for row in sql_rows(pg_url, "SELECT event_id FROM durableq_message_events ORDER BY event_id")
    ]
    exported = sorted(row["event_id"] for row in to_rows(read_export(spark, out / "events")))
    assert len(committed) == 3 and exported == committed
