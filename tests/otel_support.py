"""What the OpenTelemetry tests share: the SDK's in-memory exporters behind the instrumentor, a
worker that stops after a number of jobs, and the ids of spans."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

import durableq
from durableq.otel import DurableqInstrumentor
from tests.conftest import until


@dataclass
class Recorded:
    """What the instrumentor recorded while :func:`recording` was on."""

    provider: TracerProvider
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The one span called ``name``, once it ended: a worker's ``run()`` may return before the
        thread of its last job ended that job's span (the job left the worker's books first)."""
        until(lambda: self.named(name), f"a span {name!r} ended")
        [span] = self.named(name)
        return span

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, value or count) of each data point of ``metric``, and its unit first."""
        found = []
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found += [
                            (
                                m.unit,
                                dict(p.attributes or {}),
                                getattr(p, "value", None) or p.count,
                            )
                            for p in m.data.data_points
                        ]
        return found


def run_worker(queue: durableq.Queue, handler: Any, jobs: int) -> None:
    """A worker over ``queue`` that stops once ``jobs`` handlers were called."""
    called = []

    def counting(message: durableq.Message) -> None:
        called.append(message)
        try:
            handler(message)
        finally:
            if len(called) == jobs:
                worker.stop()

    worker = durableq.Worker(queue, counting, wait_time=1, grace_period=10)
    worker.run()


def link_of(span: ReadableSpan) -> tuple[int, int]:
    [link] = span.links
    return link.context.trace_id, link.context.span_id


def traceparent(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` that names ``span``."""
    assert span.context is not None
    context = span.context
    return (
        f"00-{format_trace_id(context.trace_id)}-{format_span_id(context.span_id)}-{context.trace_flags:02x}"
    )


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


@contextmanager
def recording() -> Iterator[Recorded]:
    """durableq instrumented, into in-memory exporters, until the block ends."""
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    DurableqInstrumentor().instrument(tracer_provider=tracing, meter_provider=MeterProvider([metrics]))
    try:
        yield Recorded(tracing, spans, metrics)
    finally:
        DurableqInstrumentor().uninstrument()
