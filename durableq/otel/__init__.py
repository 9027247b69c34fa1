"""OpenTelemetry traces and metrics for durableq, the optional extra ``durableq[otel]``.

    from durableq.otel import DurableqInstrumentor

    DurableqInstrumentor().instrument(tracer_provider=..., meter_provider=...)  # both optional
    ...
    DurableqInstrumentor().uninstrument()

The instrumentor follows the conventions of ``opentelemetry-instrumentation`` (it is a
``BaseInstrumentor``, also found by ``opentelemetry-instrument`` through its entry point).  It wraps
the public message calls of every queue handle (``send``, ``send_file``, ``send_batch``,
``receive``, ``receive_async``) and a worker's jobs, and ``uninstrument()`` puts the original functions back:
while it is off, durableq runs exactly the code it runs without this package, at no cost.  What it
records is in ``telemetry.py``; how the trace context travels with a message in ``carrier.py``.
Instrumenting is per process: a worker with ``processes=True`` started by fork inherits it; one
started otherwise instruments in its ``process_initializer``.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from .errors import OtelExtraMissing

try:
    from opentelemetry import metrics, trace
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
    from opentelemetry.instrumentation.utils import unwrap
    from wrapt import wrap_function_wrapper
except ImportError as exc:
    raise OtelExtraMissing(exc.name or "opentelemetry") from exc

from .. import __version__, worker, worker_jobs
from ..handle import QueueHandle
from .telemetry import Telemetry

__all__ = ["DurableqInstrumentor", "OtelExtraMissing"]

#: The semantic conventions whose names the spans and metrics use.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.30.0"

#: (owner, attribute, the Telemetry method that wraps it): everything instrumenting changes.
_WRAPPED = (
    (QueueHandle, "send", "send"),
    (QueueHandle, "send_file", "send_file"),
    (QueueHandle, "send_batch", "send_batch"),
    (QueueHandle, "receive", "receive"),
    (QueueHandle, "receive_async", "receive_async"),
    (worker.Worker, "_handle", "process"),
    (worker.Worker, "_finish", "finish"),
    (worker_jobs, "rolled_back", "rolled_back"),
)


class DurableqInstrumentor(BaseInstrumentor):  # type: ignore[misc]  # opentelemetry-instrumentation is untyped
    """Traces and metrics of durableq's sends, receives and worker jobs (see :mod:`durableq.otel`).

    ``instrument(tracer_provider=None, meter_provider=None, trace_empty_receives=False)`` uses the
    global providers where none is given; a receive that returns no message records its duration
    but no span unless ``trace_empty_receives`` (a polling worker would make one a second).  A
    second ``instrument()`` before ``uninstrument()`` does nothing (and logs a warning), as every
    OpenTelemetry instrumentor does.  One instance per process (``BaseInstrumentor`` makes it a
    singleton).
    """

    #: ``BaseInstrumentor`` checks its flag, wraps, then sets the flag, with no lock: two threads
    #: instrumenting at once would both wrap, and one ``uninstrument()`` would leave a layer behind.
    _switching = threading.Lock()

    def instrument(self, **kwargs: Any) -> None:
        with self._switching:
            super().instrument(**kwargs)

    def uninstrument(self, **kwargs: Any) -> None:
        with self._switching:
            super().uninstrument(**kwargs)

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # durableq instruments itself: nothing else must be installed

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(__name__, __version__, kwargs.get("tracer_provider"), schema_url=SCHEMA_URL)
        meter = metrics.get_meter(__name__, __version__, kwargs.get("meter_provider"), schema_url=SCHEMA_URL)
        telemetry = Telemetry(tracer, meter, trace_empty_receives=bool(kwargs.get("trace_empty_receives")))
        for owner, name, wrapper in _WRAPPED:
            wrap_function_wrapper(owner, name, getattr(telemetry, wrapper))

    def _uninstrument(self, **kwargs: Any) -> None:
        for owner, name, _ in _WRAPPED:
            unwrap(owner, name)
