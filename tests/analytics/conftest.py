"""Fixtures of the analytics tests: one local Spark session and one scenario file per test session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pyspark.sql import SparkSession

import durableq
from durableq.analytics import QueueAnalytics, to_rows
from durableq.analytics.session import plan_session, start_session

from . import reference, scenario


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session, owned = start_session(plan_session(None, None))
    yield session
    if owned:
        session.stop()


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> scenario.Scenario:
    return scenario.build(tmp_path_factory.mktemp("scenario") / "queue.db")


@pytest.fixture(scope="session")
def analytics(spark: SparkSession, world: scenario.Scenario) -> Iterator[QueueAnalytics]:
    with QueueAnalytics.open(world.path, spark=spark, clock=world.clock, partitions=3) as opened:
        yield opened


@dataclass(frozen=True)
class Library:
    """What the library itself says about the scenario file, at the snapshot time."""

    stats: dict[str, durableq.QueueStats]
    metrics: dict[str, list[durableq.MinuteMetrics]]
    attributes: dict[str, dict[str, Any]]


@pytest.fixture(scope="session")
def library(world: scenario.Scenario, analytics: QueueAnalytics) -> Library:
    # Asked after the snapshot (stats() sweeps expired messages), at the same clock time.
    assert int(world.clock() * 1000) == analytics.now_ms
    with durableq.open(world.path, clock=world.clock, durability="normal") as broker:
        queues = [broker.get_queue(name) for name in broker.list_queues()]
        metrics = {q.name: q.metrics() for q in queues}  # before stats() adds its sweep to the counters
        return Library(
            stats={q.name: q.stats() for q in queues},
            metrics=metrics,
            attributes={q.name: q.attributes() for q in queues},
        )


@pytest.fixture(scope="session")
def snapshot_rows(analytics: QueueAnalytics) -> list[reference.Row]:
    """Every message row of the snapshot file, expired or not, read with sqlite3."""
    return reference.message_rows(analytics.snapshot_path)


@pytest.fixture(scope="session")
def spark_messages(analytics: QueueAnalytics) -> dict[str, dict[str, Any]]:
    """``messages()`` collected, by message id."""
    return {row["message_id"]: row for row in to_rows(analytics.messages())}


@pytest.fixture(scope="session")
def report_rows(analytics: QueueAnalytics) -> Callable[[str], list[dict[str, Any]]]:
    """The rows of a report over the whole snapshot, computed once per report."""
    cache: dict[str, list[dict[str, Any]]] = {}

    def rows(name: str) -> list[dict[str, Any]]:
        if name not in cache:
            cache[name] = to_rows(analytics.report(name))
        return cache[name]

    return rows
