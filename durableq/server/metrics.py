"""``GET /metrics``: every queue's depth and counters in the Prometheus text format.

The CloudWatch analogue: a Prometheus server (or anything that reads its
format) scrapes the endpoint.  The figures come from the library at scrape
time (``Queue.stats`` and ``Queue.metrics``), in the pool like any library
call; ``prometheus_client`` writes the format.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

import durableq
from durableq.types import MinuteMetrics

#: The per-minute counters of ``Queue.metrics()``, as Prometheus counters (``durableq_<name>_total``).
_COUNTERS = {
    "sent": "Messages sent",
    "received": "Messages received (a message received twice counts twice)",
    "deleted": "Messages deleted",
    "moved_to_dead_letter": "Messages moved to the dead-letter queue by a receive",
    "expired": "Messages removed because their retention period passed",
    "empty_receives": "Receives that returned no message",
    "moved_in": "Messages that arrived by a dead-letter move or a message move task",
    "moved_out": "Messages that left by a message move task",
    "purged": "Messages removed by purge",
}
_NOT_COUNTERS = {"minute"}
#: What ``Queue.stats()`` gives, as gauges (SQS's names in the help text).
_GAUGES = {
    "visible": ("durableq_messages_visible", "Messages ready to receive (ApproximateNumberOfMessages)"),
    "in_flight": (
        "durableq_messages_in_flight",
        "Messages received, not deleted, not visible again (ApproximateNumberOfMessagesNotVisible)",
    ),
    "delayed": (
        "durableq_messages_delayed",
        "Messages whose delay has not passed (ApproximateNumberOfMessagesDelayed)",
    ),
    "oldest": (
        "durableq_oldest_message_age_seconds",
        "Age of the oldest message (ApproximateAgeOfOldestMessage)",
    ),
}


class QueueCollector:
    """A prometheus_client collector: reads every queue of the broker when scraped."""

    def __init__(self, broker: durableq.Broker, server: Callable[[], Mapping[str, int]]) -> None:
        """``server`` gives the endpoint's own gauges (connections, waiting receives, pending work)."""
        self._broker = broker
        self._server = server
        fields = {f.name for f in dataclasses.fields(MinuteMetrics)} - _NOT_COUNTERS
        assert fields == set(_COUNTERS), f"name every counter of MinuteMetrics: {fields ^ set(_COUNTERS)}"

    def collect(self) -> Iterator[Metric]:
        gauges = {
            key: GaugeMetricFamily(name, text, labels=["queue"]) for key, (name, text) in _GAUGES.items()
        }
        counters = {
            key: CounterMetricFamily(
                f"durableq_{key}", f"{text}, over the minutes the file keeps", labels=["queue"]
            )
            for key, text in _COUNTERS.items()
        }
        for name in self._broker.list_queues():
            try:
                queue = self._broker.get_queue(name)
                stats = queue.stats()
                minutes = queue.metrics()
            except durableq.QueueDoesNotExist:
                continue  # deleted while the scrape ran
            gauges["visible"].add_metric([name], stats.approximate_number_of_messages)
            gauges["in_flight"].add_metric([name], stats.approximate_number_of_messages_not_visible)
            gauges["delayed"].add_metric([name], stats.approximate_number_of_messages_delayed)
            gauges["oldest"].add_metric([name], stats.oldest_message_age)
            for key, family in counters.items():
                family.add_metric([name], sum(getattr(minute, key) for minute in minutes))
        yield from gauges.values()
        yield from counters.values()
        for key, value in self._server().items():
            yield GaugeMetricFamily(
                f"durableq_server_{key}", f"The endpoint's {key.replace('_', ' ')}", value=value
            )


class Metrics:
    """What ``GET /metrics`` answers, from a registry that holds only durableq's collector."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, broker: durableq.Broker, server: Callable[[], Mapping[str, int]]) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(QueueCollector(broker, server))

    def render(self) -> bytes:
        """The scrape's body (this reads every queue: run it where library calls run)."""
        body: bytes = generate_latest(self._registry)
        return body
