"""``GET /metrics``: every queue's depth and counters in the Prometheus text format.

The CloudWatch analogue: a Prometheus server (or anything that reads its
format) scrapes the endpoint.  The figures come from the library at scrape
time (``Queue.stats`` and ``Queue.metrics``), in the pool like any library
call; ``prometheus_client`` writes the format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

import durableq
from durableq.types import COUNTERS, MESSAGE_STATES

#: What ``Queue.stats()`` gives, as gauges (SQS's names in the help text).
_GAUGES = {
    **{
        state.name: (f"durableq_messages_{state.name}", f"{state.description} ({state.sqs})")
        for state in MESSAGE_STATES
    },
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

    def collect(self) -> Iterator[Metric]:
        gauges = {
            key: GaugeMetricFamily(name, text, labels=["queue"]) for key, (name, text) in _GAUGES.items()
        }
        counters = {
            key: CounterMetricFamily(
                f"durableq_{key}", f"{text}, over the minutes the file keeps", labels=["queue"]
            )
            for key, text in COUNTERS.items()
        }
        for name in self._broker.list_queues():
            try:
                queue = self._broker.get_queue(name)
                stats = queue.stats()
                minutes = queue.metrics()
            except durableq.QueueDoesNotExist:
                continue  # deleted while the scrape ran
            for state in MESSAGE_STATES:
                gauges[state.name].add_metric([name], getattr(stats, state.count))
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
