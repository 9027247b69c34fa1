"""The DataFrames: columns, types, values, expiry and partitioned reads, checked against the file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, IntegerType

import durableq
from durableq.analytics import COUNTERS, QueueAnalytics, to_rows
from durableq.types import datetime_from_ms
from tests.conftest import FakeClock

from . import reference, scenario
from .conftest import Library

MESSAGE_TYPES = {
    "row_id": "bigint",
    "queue": "string",
    "message_id": "string",
    "state": "string",
    "sent_at": "timestamp",
    "visible_at": "timestamp",
    "first_received_at": "timestamp",
    "receive_count": "bigint",
    "body_bytes": "bigint",
    "group_id": "string",
    "deduplication_id": "string",
    "sequence": "bigint",
    "dead_letter_source": "string",
    "payload_bytes": "bigint",
    "stored_outside": "boolean",
    "encrypted": "boolean",
    "age_seconds": "double",
}


def test_messages_have_stable_columns_and_types(analytics: QueueAnalytics) -> None:
    assert dict(analytics.messages().dtypes) == MESSAGE_TYPES
    assert list(analytics.messages().columns) == list(MESSAGE_TYPES)
    assert dict(analytics.metrics().dtypes) == {"queue": "string", "minute": "timestamp"} | dict.fromkeys(
        COUNTERS, "bigint"
    )
    queue_types = dict(analytics.queues().dtypes)
    assert queue_types["fifo"] == "boolean"
    assert queue_types["retention_period"] == "bigint"
    assert queue_types["created_at"] == queue_types["last_modified"] == "timestamp"


def test_every_unexpired_message_appears_once_with_its_stored_values(
    analytics: QueueAnalytics,
    snapshot_rows: list[reference.Row],
    spark_messages: dict[str, dict[str, Any]],
) -> None:
    now = analytics.now_ms
    expected = {r.message_id: r for r in reference.live(snapshot_rows, now)}
    assert len(expected) > 20_000
    assert spark_messages.keys() == expected.keys()
    for message_id, row in spark_messages.items():
        stored = expected[message_id]
        assert row["row_id"] == stored.row_id
        assert row["queue"] == stored.queue
        assert row["state"] == stored.state(now)
        assert row["sent_at"] == datetime_from_ms(stored.enqueued_at)
        assert row["visible_at"] == datetime_from_ms(stored.visible_at)
        first = stored.first_received_at
        assert row["first_received_at"] == (None if first is None else datetime_from_ms(first))
        assert row["receive_count"] == stored.receive_count
        assert row["body_bytes"] == len(stored.body.encode("utf-8"))
        assert (row["group_id"], row["deduplication_id"], row["sequence"]) == (
            stored.group_id,
            stored.deduplication_id,
            stored.sequence,
        )
        assert row["dead_letter_source"] == stored.dead_letter_source
        assert row["payload_bytes"] == stored.payload_size
        assert row["stored_outside"] is (stored.payload_size is not None)
        assert row["encrypted"] is (stored.data_key_id is not None)
        assert row["age_seconds"] == (now - stored.enqueued_at) / 1000


def test_states_cover_every_case_of_the_scenario(spark_messages: dict[str, dict[str, Any]]) -> None:
    rows = spark_messages.values()
    states = Counter((row["queue"], row["state"], row["receive_count"] > 0) for row in rows)
    # orders holds all three states, and visible messages both never and once received.
    for case in [("orders", "delayed", False), ("orders", "visible", False), ("orders", "visible", True)]:
        assert states[case] > 0, case
    assert states[("orders", "in_flight", True)] == 2_000
    assert states[("scheduled", "delayed", False)] == 2_000
    assert states[("payments-dlq", "visible", True)] == scenario.PAYMENTS_MOVED - 500
    assert any(row["body_bytes"] > len(row["message_id"]) * 2 for row in spark_messages.values())


def test_payloads_and_encryption_show_without_the_key(spark_messages: dict[str, dict[str, Any]]) -> None:
    media = [row for row in spark_messages.values() if row["queue"] == "media"]
    assert len(media) == scenario.MEDIA_SENT
    assert all(row["stored_outside"] and row["payload_bytes"] > 300_000 for row in media)
    assert all(row["body_bytes"] == 0 for row in media)  # the row holds no body: the payload store does
    secure = [row for row in spark_messages.values() if row["queue"] == "secure"]
    assert len(secure) == scenario.SECURE_SENT and all(row["encrypted"] for row in secure)
    others = [row for row in spark_messages.values() if row["queue"] not in ("media", "secure")]
    assert not any(row["encrypted"] or row["stored_outside"] for row in others)


def test_values_match_what_receive_returned(
    world: scenario.Scenario, spark_messages: dict[str, dict[str, Any]]
) -> None:
    compared = 0
    for message_id, message in world.received.items():
        row = spark_messages.get(message_id)
        if row is None:  # deleted since
            continue
        if row["dead_letter_source"] is not None and row["queue"].endswith(".fifo"):
            assert row["sent_at"] > message.sent_at  # a FIFO message's enqueue time restarts in its DLQ
        else:
            assert row["sent_at"] == message.sent_at
        assert row["first_received_at"] == message.first_received_at
        assert row["receive_count"] >= message.receive_count
        compared += 1
    assert compared > 5_000


def test_epoch_milliseconds_arrive_as_64_bit_timestamps(analytics: QueueAnalytics) -> None:
    millis = analytics.messages().select(
        F.min(F.unix_millis("sent_at")).alias("low"),
        F.max(F.unix_millis("visible_at")).alias("high"),
        F.min(F.unix_seconds("sent_at")).alias("low_seconds"),
    )
    (row,) = millis.collect()
    # Past 2^32 even in seconds: neither unit fits 32 bits, yet the values are exact.
    assert row["low_seconds"] == int(scenario.START) > 2**32
    assert row["low"] == int(scenario.START * 1000)
    assert row["high"] > row["low"] > 2**41


def test_the_driver_alone_would_type_these_columns_wrongly(
    spark: SparkSession, analytics: QueueAnalytics
) -> None:
    # Why every read states its types: untouched, the driver gives 32-bit ints and decimals.
    url, table, properties = analytics._snapshot.jdbc("durableq_messages")
    raw = spark.read.format("jdbc").option("url", url).option("dbtable", table).options(**properties).load()
    types = {f.name: f.dataType for f in raw.schema.fields}
    assert isinstance(types["receive_count"], IntegerType)
    assert isinstance(types["id"], IntegerType)
    assert isinstance(types["enqueued_at"], DecimalType)


def test_expired_messages_are_in_the_file_but_not_in_the_frames(
    analytics: QueueAnalytics, snapshot_rows: list[reference.Row], library: Library
) -> None:
    audit = [r for r in snapshot_rows if r.queue == "audit"]
    expired = [r for r in audit if r.expired(analytics.now_ms)]
    assert len(expired) == scenario.AUDIT_EXPIRED
    counted = analytics.messages().where(F.col("queue") == "audit").count()
    assert counted == scenario.AUDIT_LIVE == library.stats["audit"].approximate_number_of_messages


def partition_sizes(frame: DataFrame) -> list[tuple[int, int, int]]:
    """(lowest row id, highest row id, rows) of each partition of ``frame``, in row-id order."""
    per_partition = frame.groupBy(F.spark_partition_id().alias("p")).agg(
        F.count(F.lit(1)).alias("n"), F.min("row_id").alias("low"), F.max("row_id").alias("high")
    )
    return sorted((r["low"], r["high"], r["n"]) for r in per_partition.collect())


def test_messages_are_read_in_even_row_id_ranges(
    analytics: QueueAnalytics, snapshot_rows: list[reference.Row]
) -> None:
    frame = analytics.messages()
    assert frame.rdd.getNumPartitions() == 3
    ranges = partition_sizes(frame)
    live = reference.live(snapshot_rows, analytics.now_ms)
    # Disjoint, ordered ranges that together hold every unexpired message, in parts of equal size.
    assert len(ranges) == 3
    assert ranges[0][1] < ranges[1][0] and ranges[1][1] < ranges[2][0]
    assert sum(n for _, _, n in ranges) == len(live)
    assert max(n for _, _, n in ranges) - min(n for _, _, n in ranges) <= 1


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few old messages with low row ids, then a gap (a purged queue), then many new ones."""
    path = tmp_path_factory.mktemp("skewed") / "skewed.db"
    with durableq.open(path, clock=FakeClock(scenario.START), durability="normal") as broker:
        old, gone, new = (broker.create_queue(name) for name in ("old", "gone", "new"))
        scenario.send(old, 4)
        scenario.send(gone, 30_000)
        scenario.send(new, 1)  # its row id keeps the ids of the next ones above the gap
        gone.purge()
        scenario.send(new, 10_000, "-more")
    return path


def test_skewed_row_ids_still_give_even_partitions(spark: SparkSession, skewed: Path) -> None:
    with reference.connect_ro(skewed) as conn:
        ids = [row_id for (row_id,) in conn.execute("SELECT id FROM durableq_messages ORDER BY id")]
    assert ids[4] - ids[3] > 30_000 and len(ids) == 10_005  # the gap the purge left
    with QueueAnalytics.open(skewed, spark=spark, clock=FakeClock(scenario.START), partitions=4) as opened:
        sizes = [n for _, _, n in partition_sizes(opened.messages())]
    assert len(sizes) == 4 and sum(sizes) == len(ids)
    # Ranges between the lowest and highest id would give 4, 0, 0 and 10,001 rows.
    mean = len(ids) / 4
    assert max(sizes) <= 2 * mean
    assert max(sizes) - min(sizes) <= 1


def test_fewer_messages_than_partitions(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "three.db"
    with durableq.open(path, durability="normal") as broker:
        scenario.send(broker.create_queue("few"), 3)
    with QueueAnalytics.open(path, spark=spark, partitions=8) as opened:
        assert [n for _, _, n in partition_sizes(opened.messages())] == [1, 1, 1]


def test_default_partitions_follow_spark_parallelism(spark: SparkSession, world: scenario.Scenario) -> None:
    with QueueAnalytics.open(world.path, spark=spark, clock=world.clock) as opened:
        assert opened.messages().rdd.getNumPartitions() == spark.sparkContext.defaultParallelism


def test_queues_frame_matches_queue_attributes(analytics: QueueAnalytics, library: Library) -> None:
    rows = {row["queue"]: row for row in to_rows(analytics.queues())}
    assert sorted(rows) == list(scenario.QUEUE_NAMES)
    for name, attributes in library.attributes.items():
        row = rows[name]
        policy = attributes["redrive_policy"]
        assert row["fifo"] is attributes["fifo"]
        assert row["retention_period"] == attributes["retention_period"]
        assert row["delay_seconds"] == attributes["delay_seconds"]
        assert row["dead_letter_queue"] == (policy and policy.dead_letter_queue)
        assert row["max_receive_count"] == (policy and policy.max_receive_count)
        assert row["created_at"] == attributes["created_at"]


def test_metrics_frame_matches_queue_metrics(analytics: QueueAnalytics, library: Library) -> None:
    rows = to_rows(analytics.metrics())
    got = {(r["queue"], r["minute"]): tuple(r[c] for c in COUNTERS) for r in rows}
    expected = {
        (name, m.minute): tuple(getattr(m, c) for c in COUNTERS)
        for name, minutes in library.metrics.items()
        for m in minutes
    }
    assert got == expected
    assert len({minute for _, minute in got}) >= 5
