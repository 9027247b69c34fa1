"""A Structured Streaming source over message history: ``format("durableq-events")``.

    from durableq.analytics import register_event_stream

    register_event_stream(spark)  # imports this module
    events = spark.readStream.format("durableq-events").option("path", "/srv/queue.db").load()

Offsets are event ids (they only grow and are never reused), so a query's checkpoint resumes
after the last event it processed, with no event twice and none skipped: the latest offset is
``Broker.newest_event_id``, which (like every read of events) reads a settled snapshot (on
PostgreSQL it waits for the writes under way), so no event at or below it is still to commit.
Each micro-batch reads the events of every queue that keeps history in (previous offset, latest
offset] through the library (``Broker.message_events``), in the Spark worker, from the live
database: a file (an absolute path, reachable where the workers run: a local master, or executors
on the queue's host), or a ``postgresql://`` URL the workers can connect to (option ``schema``:
durableq's schema there).  The rows have :data:`~durableq.analytics.EVENTS_SCHEMA`; with option
``table`` ``audit``, the audit trail's (``Broker.audit``), with
:data:`~durableq.analytics.AUDIT_SCHEMA`.

With ``trigger(availableNow=True)`` a query reads up to the newest event of the moment it starts,
in micro-batches of at most ``maxEventsPerBatch``, and stops: the incremental export
(:mod:`.incremental`) is such a query.  Needs PySpark's Python data source API (PySpark 4; read
limits and ``availableNow`` in batches from 4.2) and pyarrow (in ``durableq[spark]``); Spark's Python
workers must import durableq (a session durableq starts runs them with its own interpreter,
``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from ..engines.urls import postgres_url
from .events import AUDIT_SCHEMA, EVENT_TABLES, EVENTS_SCHEMA
from .events import EVENT_STREAM_FORMAT as FORMAT

try:  # PySpark 4.2: read limits, and availableNow in several batches
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0 and 4.1
    ReadLimit = ReadMaxRows = ReadAllAvailable = None  # type: ignore[assignment,misc]
    _AvailableNow = object  # type: ignore[assignment,misc]

#: Events per micro-batch at most (option ``maxEventsPerBatch``).
DEFAULT_BATCH = 100_000
#: Events read from the library per call, in a worker.
_PAGE = 10_000


class _Range(InputPartition):
    def __init__(self, after: int, until: int) -> None:
        self.after = after
        self.until = until


class EventStream(DataSource):
    """The ``durableq-events`` streaming source; options: ``path`` (the durableq file's absolute
    path, or a ``postgresql://`` URL; required), ``schema`` (durableq's schema on PostgreSQL),
    ``table`` (``events``, the default, or ``audit``), ``maxEventsPerBatch`` (default 100,000)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return AUDIT_SCHEMA if self.options.get("table") == "audit" else EVENTS_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        path = self.options.get("path")
        if not path or not (os.path.isabs(path) or postgres_url(path)):
            # It is read in Spark's Python workers, whose working folder is not the caller's.
            raise ValueError(
                f'the {FORMAT} source needs .option("path", ABSOLUTE_PATH_OF_THE_FILE) '
                f"(or a postgresql:// URL); got {path!r}"
            )
        table = self.options.get("table", "events")
        if table not in EVENT_TABLES:
            raise ValueError(
                f"the {FORMAT} source's table is one of {', '.join(EVENT_TABLES)}; got {table!r}"
            )
        batch = int(self.options.get("maxEventsPerBatch", DEFAULT_BATCH))
        if batch < 1:
            raise ValueError(f"maxEventsPerBatch is a number of events, at least 1; got {batch}")
        return _Reader(str(path), batch, table, self.options.get("schema"))


class _Reader(DataSourceStreamReader, _AvailableNow):
    def __init__(self, path: str, batch: int, table: str = "events", schema: str | None = None) -> None:
        self._path = path
        self._batch = batch
        self._table = table
        self._schema = schema
        #: availableNow: the newest id when the query started; no batch reads past it.
        self._target: int | None = None

    def initialOffset(self) -> dict[str, Any]:
        return {"event_id": 0}

    def getDefaultReadLimit(self) -> Any:
        return ReadMaxRows(self._batch) if ReadMaxRows is not None else super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        with _broker(self._path, self._schema) as broker:
            self._target = self._newest(broker, 0, None)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        """The newest event id, at most a batch (``limit``, else ``maxEventsPerBatch``) past ``start``
        and never past an ``availableNow`` query's target (PySpark 4.2 passes the batch's start and
        limit; earlier versions call it without arguments)."""
        if ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            cap = None
        elif ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = int(limit.max_rows)
        else:
            cap = self._batch
        after = 0 if start is None else int(start["event_id"])
        with _broker(self._path, self._schema) as broker:
            newest = self._newest(broker, after, None if start is None else cap)
        if self._target is not None:
            newest = min(newest, max(self._target, after))
        return {"event_id": max(newest, after)}

    def _newest(self, broker: Any, after: int, cap: int | None) -> int:
        """The newest id of the table, at most ``cap`` events past ``after`` (a settled read)."""
        if self._table == "events":
            newest = int(broker.newest_event_id())
            return newest if cap is None else min(newest, after + cap)
        # The audit trail (a few rows per management call) has no "newest" call: page through it.
        while True:
            page = broker.audit(after=after, limit=_PAGE if cap is None else min(cap, _PAGE))
            if not page:
                return after
            after = page[-1].event_id
            if cap is not None:
                cap -= len(page)
                if cap <= 0:
                    return after

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return [_Range(int(start["event_id"]), int(end["event_id"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        with _broker(self._path, self._schema) as broker:
            after = partition.after
            while after < partition.until:
                if self._table == "audit":
                    rows = [
                        a for a in broker.audit(after=after, limit=_PAGE) if a.event_id <= partition.until
                    ]
                else:
                    rows = broker.message_events(after=after, until=partition.until, limit=_PAGE)
                if not rows:
                    return
                yield from (_row(e) for e in rows)
                after = rows[-1].event_id

    def commit(self, end: dict[str, Any]) -> None:
        pass  # the events stay in the database until their history retention ends


def _row(e: Any) -> tuple[Any, ...]:
    if hasattr(e, "action"):  # an AuditEvent; detail as the database stores it
        detail = json.dumps(e.detail, sort_keys=True) if e.detail else None
        return (e.event_id, e.at, e.pid, e.user, e.action, e.queue, e.outcome, detail)
    return (e.event_id, e.at, e.queue, e.event, e.message_id, e.receive_count, e.other_queue, e.visible_at)


def _broker(path: str, schema: str | None = None) -> Any:
    import durableq  # in Spark's Python worker

    if not postgres_url(path) and not os.path.isfile(path):  # durableq.open would create it
        raise FileNotFoundError(f"the {FORMAT} source reads {path!r}, which is not a file")
    return durableq.open(path, durability="normal", schema=schema)


def register(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("durableq-events")`` available in ``spark``."""
    spark.dataSource.register(EventStream)
