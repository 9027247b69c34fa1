"""Adversary 32: what instrumenting with ``durableq.otel`` changes in what an acknowledged send means.
Each test fails on the current code (xfail strict: a fix turns it into an XPASS that asks for the
mark to go)."""

from __future__ import annotations

import sys
import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

import durableq
from durableq.otel import _WRAPPED, DurableqInstrumentor
from tests.otel_support import recording

SIZE = 1024  # the smallest maximum_message_size SQS allows


def _batch() -> list[durableq.SendEntry]:
    """Three messages of one group; the middle one fits the queue's size limit, with about 20 bytes
    to spare: not enough for the ``traceparent`` attribute (about 70)."""
    return [
        durableq.SendEntry(
            id=str(i), body=("x" * 1000 if i == 1 else f"m{i}"), group_id="g", deduplication_id=str(i)
        )
        for i in range(3)
    ]


def _drain(queue: durableq.Queue) -> list[str]:
    order = []
    while messages := queue.receive(max_messages=10):
        for message in messages:
            order.append(message.body[:2])
            queue.delete(message.receipt_handle)
    return order


def test_instrumenting_keeps_the_order_of_a_fifo_group_sent_in_one_batch(broker: durableq.Broker) -> None:
    """Uninstrumented, the batch is stored in its order.  Instrumented, the middle entry is first
    refused (its context takes it over the size limit), the entries after it in the same group are
    stored, and then it is sent again without the context: the group's order becomes 0, 2, 1, the
    one thing a FIFO queue promises."""
    plain = broker.create_queue("plain.fifo", fifo=True, maximum_message_size=SIZE)
    assert plain.send_batch(_batch()).failed == []
    assert _drain(plain) == ["m0", "xx", "m2"]  # the order it was sent in

    traced = broker.create_queue("traced.fifo", fifo=True, maximum_message_size=SIZE)
    with recording():
        result = traced.send_batch(_batch())
    assert result.failed == []  # every entry acknowledged, as without instrumenting
    assert DurableqInstrumentor().is_instrumented_by_opentelemetry is False
    assert _drain(traced) == ["m0", "xx", "m2"]


def test_instrument_from_several_threads_at_once_wraps_once() -> None:
    """ "A second instrument() before uninstrument() does nothing": not when the two run at once
    (``BaseInstrumentor`` checks its flag, wraps, then sets it, with no lock).  Both wrap; the one
    ``uninstrument()`` takes one layer off, and durableq stays instrumented (every send still
    makes a span and carries a context) while the application believes it off; worse, the layer
    left is a wrapper bound to no instance, which no later uninstrument() removes and under which a
    later instrument() misreads the worker's arguments (a handler's failure is no longer recorded).
    A race, so tried until it shows (about one try in ten here; the loop stops at the first)."""
    from durableq.handle import QueueHandle

    original = QueueHandle.__dict__["send"]
    originals = [(owner, name, vars(owner)[name]) for owner, name, _ in _WRAPPED]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the window is a few statements
    try:
        for _ in range(300):
            start = threading.Barrier(6)

            def instrument(start: threading.Barrier = start) -> None:
                start.wait()
                DurableqInstrumentor().instrument(tracer_provider=TracerProvider())

            threads = [threading.Thread(target=instrument) for _ in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            DurableqInstrumentor().uninstrument()
            left = QueueHandle.__dict__["send"]
            if left is not original:
                break
    finally:
        sys.setswitchinterval(previous)
        # Leave the process as it was: the originals back (uninstrument() cannot: after a double
        # wrap it leaves the class a wrapper already bound to no instance).
        for owner, name, function in originals:
            setattr(owner, name, function)
    assert left is original


def test_instrumenting_never_changes_an_attribute_the_caller_sent(queue: durableq.Queue) -> None:
    """Only a ``traceparent`` already there is kept; a ``tracestate`` attribute of the caller's own
    (without a ``traceparent``) is replaced by the current span's trace state: the message stored
    is not the message sent, and the send said nothing."""
    vendor = SpanContext(0x1234, 0x5678, True, TraceFlags(TraceFlags.SAMPLED), TraceState([("vendor", "x")]))
    with recording(), trace.use_span(NonRecordingSpan(vendor)):
        queue.send("hi", attributes={"tracestate": "the caller's own", "k": "v"})
    [message] = queue.receive()
    assert message.attributes["tracestate"].value == "the caller's own"
