"""A Structured Streaming source over message history: ``format("durableq-events")``.

    from durableq.analytics import register_event_stream

    register_event_stream(spark)  # imports this module
    events = spark.readStream.format("durableq-events").option("path", "/srv/queue.db").load()

Offsets are event ids (they only grow and are never reused), so a query's checkpoint resumes
after the last event it processed, with no event twice and none skipped: the latest offset is
``Broker.newest_event_id``, which (like every read of events) waits on PostgreSQL for the writes
under way, so no event at or below it is still to commit.  Each micro-batch reads the events of
every queue that keeps history in (previous offset, latest offset] through the library
(``Broker.message_events``), in the Spark worker, from the live database: a file (an absolute
path, reachable where the workers run: a local master, or executors on the queue's host), or a
``postgresql://`` URL the workers can connect to.  The rows have
:data:`~durableq.analytics.EVENTS_SCHEMA`.  Needs PySpark's Python data source API (PySpark 4)
and pyarrow (in ``durableq[spark]``); Spark's Python workers must import durableq (a session
durableq starts runs them with its own interpreter, ``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from ..engines.urls import postgres_url
from .events import EVENT_STREAM_FORMAT as FORMAT
from .events import EVENTS_SCHEMA

#: Events per micro-batch at most (option ``maxEventsPerBatch``).
DEFAULT_BATCH = 100_000


class _Range(InputPartition):
    def __init__(self, after: int, until: int) -> None:
        self.after = after
        self.until = until


class EventStream(DataSource):
    """The ``durableq-events`` streaming source; options: ``path`` (the durableq file's absolute
    path, or a ``postgresql://`` URL; required), ``maxEventsPerBatch`` (default 100,000)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return EVENTS_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        path = self.options.get("path")
        if not path or not (os.path.isabs(path) or postgres_url(path)):
            # It is read in Spark's Python workers, whose working folder is not the caller's.
            raise ValueError(
                f'the {FORMAT} source needs .option("path", ABSOLUTE_PATH_OF_THE_FILE) '
                f"(or a postgresql:// URL); got {path!r}"
            )
        return _Reader(str(path), int(self.options.get("maxEventsPerBatch", DEFAULT_BATCH)))


class _Reader(DataSourceStreamReader):
    def __init__(self, path: str, batch: int) -> None:
        self._path = path
        self._batch = batch

    def initialOffset(self) -> dict[str, Any]:
        return {"event_id": 0}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        """The newest event id, at most ``maxEventsPerBatch`` past ``start`` (PySpark 4.3 passes the
        batch's start; earlier versions call it without arguments)."""
        with _broker(self._path) as broker:
            newest = broker.newest_event_id()
        if start is not None:
            newest = min(newest, int(start["event_id"]) + self._batch)
        return {"event_id": newest}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return [_Range(int(start["event_id"]), int(end["event_id"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        with _broker(self._path) as broker:
            after = partition.after
            while after < partition.until:
                events = broker.message_events(after=after, until=partition.until, limit=10_000)
                if not events:
                    return
                for e in events:
                    yield (
                        e.event_id,
                        e.at,
                        e.queue,
                        e.event,
                        e.message_id,
                        e.receive_count,
                        e.other_queue,
                        e.visible_at,
                    )
                after = events[-1].event_id

    def commit(self, end: dict[str, Any]) -> None:
        pass  # the events stay in the file until their history retention ends


def _broker(path: str) -> Any:
    import durableq  # in Spark's Python worker

    if not postgres_url(path) and not os.path.isfile(path):  # durableq.open would create it
        raise FileNotFoundError(f"the {FORMAT} source reads {path!r}, which is not a file")
    return durableq.open(path, durability="normal")


def register(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("durableq-events")`` available in ``spark``."""
    spark.dataSource.register(EventStream)
