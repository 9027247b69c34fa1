"""Incremental export: append the events written since the last run to Parquet, exactly once for
readers, safe to kill at any moment.

Each table is the Parquet sink of a Structured Streaming query from the ``durableq-events`` source
(:mod:`.stream`), run with ``trigger(availableNow=True)``: it reads the events after the last
committed offset up to the newest of the moment it starts, in micro-batches, and stops::

    DIR/events/queue=orders/date=2026-11-22/part-00000-<uuid>.c000.snappy.parquet
    DIR/events/_spark_metadata/0, 1, ...    the sink's commit log: the files of each committed batch
    DIR/events/_checkpoint/offsets, commits  the query's checkpoint: each batch's event-id range
    DIR/audit/date=2026-11-22/part-...parquet
    DIR/audit/_spark_metadata, _checkpoint

Why Spark's file sink, not our own renames: its commit protocol is one that readers already
honour.  A batch writes new files under new names (never one rewritten), then commits by writing
the batch's entry into ``_spark_metadata``; a reader that reads the folder with Spark (a batch read,
or a file-stream source downstream) reads the files that log lists, and nothing else.  So a run
killed mid-batch leaves files no Spark reader sees; the next run replays the batch recorded in
its ``offsets`` (the same event-id range, into new files) and commits it once.  The offsets are
event ids read as every resuming reader of the library reads them (a settled snapshot: on
PostgreSQL, a send that commits after a later one is never passed over).  Readers outside Spark
(pyarrow, pandas, DuckDB) must read the files ``_spark_metadata`` lists, or may see a killed
batch's files: :func:`committed_files` lists them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DateType, StructField, StructType

from .. import limits, validation
from ..engines.location import file_of, open_database, require_file
from ..errors import InvalidParameterValue, NotADurableQDatabase
from .driver import driver_of
from .errors import AnalyticsError
from .events import AUDIT_SCHEMA, EVENT_STREAM_FORMAT, EVENT_TABLES, EVENTS_SCHEMA
from .outputs import explain_write_failure, group_writable, make_folder
from .session import plan_session, start_session

Rows = list[dict[str, Any]]

#: The query's checkpoint folder, inside the table's folder (``_``: Parquet readers skip it).
CHECKPOINT = "_checkpoint"
#: The file sink's commit log (Spark's name).
SINK_LOG = "_spark_metadata"
#: The checkpoint file of the export of durableq 0.x (renamed part files): refused, see below.
LEGACY_CHECKPOINT = "_checkpoint.json"
#: The partition columns of each exported table (``date``: the UTC date of ``at``).
PARTITIONS = {"events": ("queue", "date"), "audit": ("date",)}
_DAY_MS = 86_400_000
#: How often a run collects the query's progress reports (its rows).
_POLL_SECONDS = 1


def export_table(
    spark: SparkSession,
    source: str,
    table: str,
    folder: Path,
    *,
    schema: str | None = None,
    batch: int | None = None,
) -> dict[str, Any]:
    """Append ``table``'s events after ``folder``'s last committed batch; a row
    ``{table, path, rows, checkpoint}`` (``rows`` appended by this run, ``checkpoint`` the last event
    id committed).  ``source``: the database's absolute path, or its URL (and ``schema``)."""
    from .stream import register

    make_folder(folder)
    _refuse_legacy(folder)
    register(spark)
    reader = spark.readStream.format(EVENT_STREAM_FORMAT).option("path", source).option("table", table)
    if schema is not None:
        reader = reader.option("schema", schema)
    if batch is not None:
        reader = reader.option("maxEventsPerBatch", batch)
    frame = reader.load().withColumn("date", _utc_date())
    with group_writable(spark, folder):
        # Absolute: the JVM resolves a relative path against its own working folder.
        query = (
            frame.writeStream.format("parquet")
            .partitionBy(*PARTITIONS[table])
            .option("path", str(folder.resolve()))
            .option("checkpointLocation", str((folder / CHECKPOINT).resolve()))
            .trigger(availableNow=True)
            .start()
        )
        rows = _await(query, table, folder)
    return {
        "table": table,
        "path": str(folder),
        "rows": sum(rows.values()),
        "checkpoint": committed_offset(folder),
    }


def _await(query: StreamingQuery, table: str, folder: Path) -> dict[int, int]:
    """Wait for ``query`` to stop; its rows per batch.  Its failure is a clear error: the
    executors' failure to write (:mod:`.outputs`), or else the query's own first line."""
    # Spark keeps the last 100 progress reports: collected as the query goes (a batch takes longer
    # than the poll), so a big backlog's rows are all counted.
    rows: dict[int, int] = {}
    done = False
    while not done:
        try:
            done = bool(query.awaitTermination(_POLL_SECONDS))
        except StreamingQueryException as exc:
            explain_write_failure(folder, exc)
            raise AnalyticsError(
                f"the export of {table} into {folder} failed, after the batches it committed (run it "
                f"again to go on from there): {str(exc).splitlines()[0]}"
            ) from exc
        rows.update((int(p["batchId"]), int(p["numInputRows"])) for p in query.recentProgress)
    return rows


def export_events(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tables: tuple[str, ...] = EVENT_TABLES,
    master: str | None = None,
    jar: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] | None = None,
    spark: SparkSession | None = None,
    partitions: int | None = None,
    snapshot_dir: str | os.PathLike[str] | None = None,
    schema: str | None = None,
    batch: int | None = None,
    conf: Mapping[str, str] | None = None,
    verbose: bool = False,
) -> Rows:
    """Append the events written since the last run to Parquet under ``out_dir`` (a local folder).

    ``tables``: ``events`` (message history, partitioned by ``queue`` and ``date``) and/or ``audit``
    (the audit trail, by ``date``), each in its folder, the Parquet sink of an ``availableNow``
    streaming query with its checkpoint; see :mod:`durableq.analytics.incremental`.  Safe to kill and
    re-run at any point: readers (Spark's, through the sink's ``_spark_metadata``) never see a file
    of an unfinished batch, and get each event once.  Returns one row per table: ``{"table", "path",
    "rows", "checkpoint"}`` (``rows`` appended by this run, ``checkpoint`` the last event id
    committed).  ``batch``: events per micro-batch at most (default 100,000).  ``master``, ``jar`` and
    ``spark`` (and ``conf``, ``verbose``) choose the session as :meth:`QueueAnalytics.open` does;
    nothing is copied (the events
    are read from the live database, through the library), so ``clock``, ``partitions`` and
    ``snapshot_dir`` do not apply.
    """
    del clock, partitions, snapshot_dir  # kept for callers of the snapshot-based export
    unknown = [t for t in tables if t not in EVENT_TABLES]
    if unknown or not tables:
        raise InvalidParameterValue(f"tables must be some of {', '.join(EVENT_TABLES)}; got {list(tables)}")
    if "://" in str(out_dir):
        raise InvalidParameterValue(
            f"the incremental export writes to a local (or mounted) folder, not {out_dir}: "
            "it keeps its checkpoint there"
        )
    if spark is not None and (master is not None or jar is not None):
        raise InvalidParameterValue("give either spark or master/jar: a given session keeps its own")
    base = Path(out_dir)
    if base.exists() and not base.is_dir():
        raise AnalyticsError(f"{base} exists and is not a folder")
    source = check_source(path, schema)
    owns = False
    if spark is None:
        spark, owns = start_session(plan_session(master, jar, driver_of(path), conf, verbose=verbose))
    try:
        return [export_table(spark, source, t, base / t, schema=schema, batch=batch) for t in tables]
    finally:
        if owns:
            spark.stop()


def check_source(path: str | os.PathLike[str], schema: str | None) -> str:
    """``path`` as Spark's workers open it (a file's absolute path, or the URL), checked here first:
    a durableq database this code reads (the workers would only fail inside a Spark job)."""
    file = file_of(path)
    if file is not None and schema is not None:
        raise InvalidParameterValue(f"schema applies to a PostgreSQL database, not the file {path}")
    if file is None:
        schema = validation.schema_name(schema or limits.DEFAULT_POSTGRES_SCHEMA)
    else:
        require_file(path)
    database = open_database(path, "normal", limits.DEFAULT_BUSY_TIMEOUT, create=False, schema=schema)
    try:
        if database.revision() is None:
            raise NotADurableQDatabase(f"{database.name} holds no durableq tables")
    finally:
        database.close()
    return str(path) if file is None else str(file.resolve())


def committed_offset(folder: Path) -> int:
    """The last event id of the newest batch committed in ``folder``'s sink log: readers see the
    events up to it (0: none yet).  (A run killed after the sink's commit but before the query's own
    leaves the batch committed; the next run replays it and the sink skips it.)"""
    committed = _batches(folder / SINK_LOG)
    if not committed:
        return 0
    lines = (folder / CHECKPOINT / "offsets" / str(committed[-1])).read_text().splitlines()
    # Spark's offset log: a version line, the batch's metadata, then one line per source.
    return int(json.loads(lines[-1])["event_id"])


def committed_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The Parquet files of ``folder`` (a table's folder) that committed batches wrote: what a Parquet
    reader outside Spark should read (Spark reads ``_spark_metadata`` itself)."""
    log = Path(folder) / SINK_LOG
    files: dict[str, None] = {}  # in order, once (a compacted batch repeats the ones before it)
    for batch in _batches(log):
        name = str(batch) if (log / str(batch)).exists() else f"{batch}.compact"
        # Spark's log: a version line, then one JSON entry per file.
        for line in (log / name).read_text().splitlines()[1:]:
            entry = json.loads(line)
            if entry.get("action", "add") == "add":
                files[entry["path"]] = None
    # The log holds URIs (file:///...), their special characters quoted.
    return [Path(unquote(urlsplit(uri).path)) for uri in files]


def _batches(log: Path) -> list[int]:
    """The batch ids of one of Spark's logs (files named ``N`` or ``N.compact``), in order."""
    if not log.is_dir():
        return []
    return sorted({int(p.name.split(".")[0]) for p in log.iterdir() if p.name.split(".")[0].isdigit()})


def _refuse_legacy(folder: Path) -> None:
    if (folder / LEGACY_CHECKPOINT).exists():
        raise AnalyticsError(
            f"{folder} holds an export of an earlier durableq (run-*.parquet files and {LEGACY_CHECKPOINT}), "
            "which this one does not append to: export into a new folder (the old one stays readable as "
            "plain Parquet)"
        )


def _utc_date() -> Any:
    # From the epoch milliseconds, so the session's time zone does not matter.
    return F.date_from_unix_date(F.floor(F.unix_millis("at") / F.lit(_DAY_MS)).cast("int"))


def read_export(spark: SparkSession, folder: str | os.PathLike[str], table: str = "events") -> DataFrame:
    """Read back what the incremental export committed into ``folder`` (the table's folder).

    Spark reads the sink's commit log, so files of a killed run are not read.  The schema is given,
    so a partition value such as ``queue=2024`` stays a string.
    """
    if table not in EVENT_TABLES:
        raise AnalyticsError(f"unknown table {table!r}; choose one of {', '.join(EVENT_TABLES)}")
    return spark.read.schema(export_schema(table)).parquet(str(Path(folder).resolve()))


def export_schema(table: str) -> StructType:
    """The columns of an exported table: the table's, and ``date`` (a stream reader gives it)."""
    base = EVENTS_SCHEMA if table == "events" else AUDIT_SCHEMA
    return StructType([*base.fields, StructField("date", DateType())])
