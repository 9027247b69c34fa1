"""``python -m bench.analytics_partitions``: the Spark reports over a large file whose row ids are skewed.

    python -m bench.analytics_partitions                     # 1,000,000 messages, 8 partitions
    python -m bench.analytics_partitions --messages 200000 --partitions 4 --db /tmp/skewed.db

The file holds a few old messages with low row ids, then the gap a purged queue
left, then the live messages: the shape that made row-id ranges read almost
everything in one partition.  It prints the rows each partition of
``messages()`` read and the wall time of ``run_report(..., "all")`` (the
session is started before the clock runs, so Java's start-up is not counted).
The file is kept and reused when it exists with the same size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import durableq
from durableq import SendEntry

#: Messages sent per call while building the file.
BATCH = 10
OLD_MESSAGES = 4


def fill(queue: durableq.Queue, count: int, label: str) -> None:
    for start in range(0, count, BATCH):
        entries = [SendEntry(str(i), f"{label} {start + i}") for i in range(min(BATCH, count - start))]
        assert not queue.send_batch(entries).failed


def build(path: Path, messages: int) -> None:
    """A few old messages, ``messages`` sent and purged, one kept, then ``messages`` live ones."""
    for stale in path.parent.glob(path.name + "*"):
        stale.unlink()
    with durableq.open(path, durability="normal") as broker:
        old, gone, live = (broker.create_queue(name) for name in ("old", "gone", "live"))
        fill(old, OLD_MESSAGES, "old")
        fill(gone, messages, "gone")
        fill(live, 1, "first")  # keeps the row ids of the next ones above the purged range
        gone.purge()
        fill(live, messages - 1, "live")


def existing_messages(path: Path) -> int | None:
    if not path.exists():
        return None
    with durableq.open(path, durability="normal") as broker:
        return sum(broker.get_queue(name).stats().approximate_number_of_messages for name in ("old", "live"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.analytics_partitions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="report runs to time (default 3)")
    parser.add_argument("--db", type=Path, default=Path("/tmp/durableq-analytics-bench.db"))
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from durableq.analytics import QueueAnalytics, find_jdbc_jar, run_report

    if existing_messages(args.db) != args.messages + OLD_MESSAGES:
        started = time.perf_counter()
        build(args.db, args.messages)
        print(f"built {args.db} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    spark = (
        SparkSession.builder.master("local[*]")
        .config("spark.jars", str(find_jdbc_jar()))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with QueueAnalytics.open(args.db, spark=spark, partitions=args.partitions) as analytics:
        frame = analytics.messages()
        found = dict(frame.groupBy(F.spark_partition_id().alias("p")).count().collect())
        counts = [found.get(p, 0) for p in range(frame.rdd.getNumPartitions())]
    mean = statistics.fmean(counts)
    print(f"partitions: {len(counts)} (asked {args.partitions}), rows per partition: {counts}")
    print(f"largest / mean: {max(counts) / mean:.2f}")
    times = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        result = run_report(args.db, "all", spark=spark, partitions=args.partitions)
        times.append(time.perf_counter() - started)
    depth = sum(row["total"] for row in result["depth"])
    print(f"run_report('all') over {depth:,} messages: {', '.join(f'{t:.1f}' for t in times)} s")
    spark.stop()


if __name__ == "__main__":
    main()
