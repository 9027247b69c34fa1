"""Incremental export: append the events written since the last run to Parquet, safe to re-run.

Under the export folder, each table has its own folder and checkpoint::

    DIR/events/queue=orders/date=2026-11-22/run-00000000000000000042-00000.parquet
    DIR/events/_checkpoint.json      {"last_event_id": 97, ...}
    DIR/audit/date=2026-11-22/run-...parquet
    DIR/audit/_checkpoint.json

A run of one table, with checkpoint C (0 before the first run):

1. deletes what a crashed run may have left: the staging folder, and every part file whose run id
   (the first event id the run could export, C' + 1 for its checkpoint C') is above C;
2. takes the newest event id M of a snapshot and writes the events in (C, M] with Spark to staging;
3. moves each part file into its partition folder, named after the run id C + 1;
4. writes M as the new checkpoint (a temporary file, fsync, rename), then removes staging.

A crash before step 4 leaves C in place, so the next run removes the files of step 3 and exports
(C, M'] again; after step 4 the files are the run's for good.  Ids only grow and are never reused,
and a snapshot is settled (no event at or below its highest id is still to commit; on PostgreSQL,
where writes commit side by side, taking it waits for the writes under way), so (C, M] of a later
snapshot holds every event written since.  Events swept by their queue's
``history_retention`` before a run are not in any snapshot: export more often than that.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StructField, StructType

from ..engines.files import fsync_path
from .errors import AnalyticsError
from .events import AUDIT_SCHEMA, EVENT_TABLES, EVENTS_SCHEMA, last_event_id, read_event_table
from .reader import QueueAnalytics
from .window import EVERYTHING

CHECKPOINT = "_checkpoint.json"
STAGING = "_staging"
#: The partition columns of each exported table (``date``: the UTC date of ``at``).
PARTITIONS = {"events": ("queue", "date"), "audit": ("date",)}
_PART = re.compile(r"^run-(\d{20})-\d{5}\.parquet$")
_DAY_MS = 86_400_000

#: Called with each step's name ("staged", "moved", "checkpoint"); for tests that crash a run.
Hook = Callable[[str], None]


def read_checkpoint(folder: Path) -> int:
    """The last event id exported into ``folder`` (0 before the first run)."""
    path = folder / CHECKPOINT
    if not path.exists():
        return 0
    try:
        value = json.loads(path.read_text())["last_event_id"]
    except (ValueError, KeyError, TypeError) as exc:
        raise AnalyticsError(f"the checkpoint {path} is not one durableq wrote; remove the export") from exc
    if not isinstance(value, int) or value < 0:
        raise AnalyticsError(f"the checkpoint {path} holds {value!r}, not an event id; remove the export")
    return value


def write_checkpoint(folder: Path, last_event_id: int, source: Path | str) -> None:
    """Replace ``folder``'s checkpoint atomically: a temporary file, fsync, rename, fsync of the folder."""
    record = {
        "last_event_id": last_event_id,
        "source": str(source),
        "written_at": datetime.now(UTC).isoformat(),
    }
    temporary = folder / f"{CHECKPOINT}.tmp"
    with open(temporary, "w") as file:
        json.dump(record, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, folder / CHECKPOINT)
    fsync_path(folder)


def recover(folder: Path, checkpoint: int) -> int:
    """Remove what a run that did not reach its checkpoint left behind; how many part files went."""
    shutil.rmtree(folder / STAGING, ignore_errors=True)
    removed = 0
    for part in folder.rglob("run-*.parquet"):
        match = _PART.match(part.name)
        if match and int(match[1]) > checkpoint:
            part.unlink()
            removed += 1
    return removed


def export_table(
    analytics: QueueAnalytics, table: str, folder: Path, *, hook: Hook | None = None
) -> dict[str, Any]:
    """Append ``table``'s events after ``folder``'s checkpoint; a row ``{table, path, rows, checkpoint}``."""
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = read_checkpoint(folder)
    recover(folder, checkpoint)
    newest = last_event_id(analytics._open_snapshot(), table)
    if newest < checkpoint:
        raise AnalyticsError(
            f"{folder} was exported up to event {checkpoint}, but the newest event of {analytics.source} "
            f"is {newest}: is this the export of another file? Export into a new folder"
        )
    row = {"table": table, "path": str(folder), "rows": 0, "checkpoint": newest}
    if newest == checkpoint:
        return row
    frame = read_event_table(analytics.spark, analytics._open_snapshot(), table, EVERYTHING, after=checkpoint)
    frame = frame.where(F.col("event_id") <= F.lit(newest)).withColumn("date", _utc_date())
    staging = folder / STAGING
    frame.write.partitionBy(*PARTITIONS[table]).parquet(str(staging.resolve()))
    _step(hook, "staged")
    moved = _move_parts(staging, folder, checkpoint + 1, hook)
    # Absolute: the JVM resolves a relative path against its own working folder.
    row["rows"] = analytics.spark.read.parquet(*(str(p.resolve()) for p in moved)).count() if moved else 0
    _step(hook, "checkpoint")
    write_checkpoint(folder, newest, analytics.source)
    shutil.rmtree(staging, ignore_errors=True)
    return row


def _utc_date() -> Any:
    # From the epoch milliseconds, so the session's time zone does not matter.
    return F.date_from_unix_date(F.floor(F.unix_millis("at") / F.lit(_DAY_MS)).cast("int"))


def _step(hook: Hook | None, name: str) -> None:
    if hook is not None:
        hook(name)


def _move_parts(staging: Path, folder: Path, run_id: int, hook: Hook | None) -> list[Path]:
    """Move the staged part files into their partition folders, named after ``run_id``; where they went."""
    moved = []
    for number, part in enumerate(sorted(staging.rglob("part-*.parquet"))):
        target = folder / part.parent.relative_to(staging) / f"run-{run_id:020d}-{number:05d}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
        moved.append(target)
        _step(hook, "moved")
    for partition in {target.parent for target in moved}:
        fsync_path(partition)
    return moved


def read_export(spark: SparkSession, folder: str | os.PathLike[str], table: str = "events") -> DataFrame:
    """Read back what the incremental export wrote into ``folder`` (the table's folder).

    The schema is given, so a partition value such as ``queue=2024`` stays a string.
    """
    if table not in EVENT_TABLES:
        raise AnalyticsError(f"unknown table {table!r}; choose one of {', '.join(EVENT_TABLES)}")
    base = EVENTS_SCHEMA if table == "events" else AUDIT_SCHEMA
    schema = StructType([*base.fields, StructField("date", DateType())])
    path = str(Path(folder).resolve())
    return spark.read.schema(schema).option("basePath", path).parquet(path)
