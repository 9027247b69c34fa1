"""The per-minute counters and the message states are declared once (durableq/types.py:
``MinuteMetrics`` and ``MESSAGE_STATES``); what cannot read the declaration (SQL, the schema, the
docs) is checked against it here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import durableq
from durableq.engines import schema
from durableq.ops.states import STATE_SQL
from durableq.types import COUNTERS, MESSAGE_STATES, MinuteMetrics, QueueStats

ENDPOINT_PAGE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "endpoint.md"


def test_the_counters_are_the_fields_of_minute_metrics_and_the_columns_of_queue_metrics() -> None:
    fields = [f.name for f in dataclasses.fields(MinuteMetrics)]
    assert fields == ["minute", *COUNTERS]
    assert all(COUNTERS.values())  # each says what it counts (the Prometheus help)
    assert {c.name for c in schema.queue_metrics.c} == {"queue_id", "minute", *COUNTERS}


def test_the_states_are_what_the_sql_classifies_and_what_stats_count() -> None:
    assert sorted(re.findall(r"(?:THEN|ELSE) '(\w+)'", STATE_SQL)) == sorted(s.name for s in MESSAGE_STATES)
    stats = [f.name for f in dataclasses.fields(QueueStats)]
    assert stats[: len(MESSAGE_STATES)] == [s.count for s in MESSAGE_STATES]


def test_the_endpoint_page_names_every_prometheus_metric() -> None:
    readme = ENDPOINT_PAGE.read_text(encoding="utf-8")
    for counter in COUNTERS:
        assert f"`durableq_{counter}_total`" in readme, counter
    for state in MESSAGE_STATES:
        assert f"`durableq_messages_{state.name}`" in readme, state.name


def test_a_queue_counts_every_counter(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    queue.send("x")
    queue.receive()
    queue.receive()  # empty
    queue.purge()
    (minute,) = queue.metrics()
    assert (minute.sent, minute.received, minute.empty_receives, minute.purged) == (1, 1, 1, 1)
