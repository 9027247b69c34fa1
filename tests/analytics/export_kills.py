"""Kill the incremental export (SIGKILL of the process running it, its JVM with it) at chosen moments,
and read its output as downstream readers do: a Spark batch read, and a Spark file-stream reader
that resumes from its own checkpoint.  Used by test_export_kills.py (short) and by
``python -m tests.reliability.export_kills`` (every kill point, many rounds).

Run as ``python -m tests.analytics.export_kills DB OUT BATCH``, it is the process that is killed: one
export of the events of DB into OUT, in micro-batches of BATCH events.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

import durableq
from durableq.analytics import committed_files, export_events, to_rows
from durableq.analytics.incremental import CHECKPOINT, SINK_LOG, export_schema

#: A moment of a run, seen from outside in the export folder (``OUT/events``): kill when true.
Moment = Callable[[Path], bool]


def _batch_file(log: str, batch: int) -> Moment:
    return lambda folder: (folder / log / str(batch)).exists()


def uncommitted_files(folder: Path) -> bool:
    """Part files of a batch not yet in the sink's log: what a reader must not see."""
    listed = set(committed_files(folder))
    return any(f not in listed for f in folder.glob("queue=*/date=*/part-*.parquet"))


#: The kill points: a batch planned (its range in offsets, files maybe half-written); files written
#: but not committed; committed in the sink's log, not yet in the query's commit log.
MOMENTS: dict[str, Moment] = {
    "batch-planned": _batch_file(f"{CHECKPOINT}/offsets", 1),
    "files-uncommitted": uncommitted_files,
    "sink-committed": lambda f: (
        _batch_file(SINK_LOG, 1)(f) and not _batch_file(f"{CHECKPOINT}/commits", 1)(f)
    ),
    "later-batch-planned": _batch_file(f"{CHECKPOINT}/offsets", 3),
}


@dataclass
class Killed:
    """What a kill did: whether the moment was seen (else the run ended first) and the run's code."""

    seen: bool
    returncode: int


def run_and_kill(db: Path, out: Path, batch: int, moment: Moment, timeout: float = 600) -> Killed:
    """Start an export of ``db`` into ``out`` in a process of its own; SIGKILL it (and its JVM: the
    process group it leads) as soon as ``moment`` holds."""
    temp = out.parent / "tmp"  # its temp folder: Spark's scratch files go there (in a run folder)
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(temp)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.analytics.export_kills", str(db), str(out), str(batch)],
        start_new_session=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    folder = out / "events"
    deadline = time.monotonic() + timeout
    seen = False
    try:
        while child.poll() is None and time.monotonic() < deadline:
            if folder.is_dir() and _holds(moment, folder):
                seen = True
                break
            time.sleep(0.002)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(60)
    if not seen and child.returncode != 0:
        raise AssertionError(f"the export failed on its own: {child.stderr.read().decode()[-3000:]}")
    return Killed(seen, child.returncode)


def _holds(moment: Moment, folder: Path) -> bool:
    try:
        return moment(folder)
    except (OSError, ValueError):  # a log file being written: not yet
        return False


def library_ids(db: Path) -> list[int]:
    """Every message event of ``db``, as the library reads it."""
    ids: list[int] = []
    with durableq.open(db) as broker:
        while page := broker.message_events(after=ids[-1] if ids else 0, limit=100_000):
            ids.extend(e.event_id for e in page)
    return ids


def batch_read(spark: SparkSession, out: Path) -> list[int]:
    """Event ids of a Spark batch read of the export (it honours the sink's log)."""
    folder = str((out / "events").resolve())
    return sorted(r["event_id"] for r in to_rows(spark.read.schema(export_schema("events")).parquet(folder)))


class StreamReader:
    """A downstream Spark file-stream reader of the export, resuming from its own checkpoint: each
    :meth:`read` takes what it has not read yet; :attr:`ids` is everything it read, in order."""

    def __init__(self, spark: SparkSession, out: Path, work: Path) -> None:
        self._spark = spark
        self._source = str((out / "events").resolve())
        self._sink = str((work / "read").resolve())
        self._checkpoint = str((work / "read-checkpoint").resolve())

    def read(self) -> None:
        query = (
            self._spark.readStream.schema(export_schema("events"))
            .parquet(self._source)
            .writeStream.format("parquet")
            .option("path", self._sink)
            .option("checkpointLocation", self._checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    @property
    def ids(self) -> list[int]:
        if not Path(self._sink, SINK_LOG).is_dir():
            return []
        return [
            r["event_id"]
            for r in to_rows(self._spark.read.schema(export_schema("events")).parquet(self._sink))
        ]


if __name__ == "__main__":
    db, out, batch = sys.argv[1:4]
    export_events(db, out, tables=("events",), batch=int(batch), master="local[1]")
