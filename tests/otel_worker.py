"""A handler module for ``durableq worker`` in another process, instrumented with OpenTelemetry.

Importing it (the worker command imports a handler's module before it starts) sets up the SDK with
an exporter that appends each finished span, as one JSON line, to the file that
``DURABLEQ_TEST_SPANS`` names, and instruments durableq: so the test that started the process reads
the worker's spans from that file once the process exits.  A span is written when it ends (a
simple span processor), so nothing waits for an exit hook that a killed process would skip.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import durableq
from durableq.otel import DurableqInstrumentor

SPANS = "DURABLEQ_TEST_SPANS"


class JsonLinesExporter(SpanExporter):
    """Appends each span as one JSON line (the SDK's own ``to_json``) to a file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(span.to_json(indent=None) + "\n" for span in spans)
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(lines)
        return SpanExportResult.SUCCESS


if SPANS in os.environ:
    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.environ[SPANS])))
    DurableqInstrumentor().instrument(tracer_provider=_provider)


def handle(message: durableq.Message) -> None:
    """Succeeds, unless the body says ``fail``."""
    if message.body == "fail":
        raise RuntimeError("the handler was told to fail")
