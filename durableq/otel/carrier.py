"""Where a message carries its trace context: W3C Trace Context in two message attributes, and
SQS's AWSTraceHeader system attribute read as X-Ray writes it.

The context travels as the message attributes ``traceparent`` (and ``tracestate`` when it is not
empty), the names the W3C propagator writes and the OpenTelemetry instrumentation of botocore puts
on SQS messages, so a boto3 producer instrumented for SQS and a durableq consumer understand each
other through the endpoint.  Only Trace Context is carried, whatever propagators the application
configured: every carried field is a message attribute, and SQS allows 10 of them on a message, so
durableq spends at most two, and none (the message is sent without a context) when the message's
own attributes leave no room.  Baggage is not carried for the same reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    TraceFlags,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..limits import MAX_MESSAGE_ATTRIBUTES
from ..types import Attribute, AttributeInput, Message

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

_W3C = TraceContextTextMapPropagator()

#: X-Ray's header: Root=1-{8 hex: epoch seconds}-{24 hex};Parent={16 hex};Sampled={0|1}, in any order.
_XRAY_ROOT = re.compile(r"(?:^|;)\s*Root=1-([0-9a-fA-F]{8})-([0-9a-fA-F]{24})\s*(?:;|$)")
_XRAY_PARENT = re.compile(r"(?:^|;)\s*Parent=([0-9a-fA-F]{16})\s*(?:;|$)")
_XRAY_SAMPLED = re.compile(r"(?:^|;)\s*Sampled=1\s*(?:;|$)")


def with_context(
    attributes: Mapping[str, AttributeInput] | None, span: Span
) -> Mapping[str, AttributeInput] | None:
    """``attributes`` plus the context of ``span`` (a new mapping; the caller's is not changed).

    Unchanged when they carry a ``traceparent`` already (the message was created elsewhere: a
    relay, the endpoint), or a ``tracestate`` of the caller's own (never overwritten), or when there
    is no room left for the context under SQS's 10 attributes.
    """
    if attributes is not None and (TRACEPARENT in attributes or TRACESTATE in attributes):
        return attributes
    fields: dict[str, str] = {}
    _W3C.inject(fields, context=set_span_in_context(span))
    if TRACEPARENT not in fields:  # an invalid span (no provider): nothing to carry
        return attributes
    taken = len(attributes) if attributes is not None else 0
    if taken + len(fields) > MAX_MESSAGE_ATTRIBUTES:
        return attributes
    return {**(attributes or {}), **fields}


def creation_context(
    attributes: Mapping[str, AttributeInput] | None, trace_header: str | None
) -> SpanContext | None:
    """The context a message was created in: its ``traceparent`` attribute, else its AWSTraceHeader."""
    if attributes is not None and TRACEPARENT in attributes:
        fields = {name: _text(attributes[name]) for name in (TRACEPARENT, TRACESTATE) if name in attributes}
        return _valid(_W3C.extract(fields))
    if trace_header is not None:
        return from_trace_header(trace_header)
    return None


def of_message(message: Message) -> SpanContext | None:
    """The context the received ``message`` was created in (see :func:`creation_context`)."""
    return creation_context(message.attributes, message.trace_header)


def from_trace_header(header: str) -> SpanContext | None:
    """The span an AWSTraceHeader names (X-Ray's trace id is its two hex parts joined), or None."""
    root, parent = _XRAY_ROOT.search(header), _XRAY_PARENT.search(header)
    if root is None or parent is None:
        return None
    context = SpanContext(
        trace_id=int(root.group(1) + root.group(2), 16),
        span_id=int(parent.group(1), 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED if _XRAY_SAMPLED.search(header) else TraceFlags.DEFAULT),
    )
    return context if context.is_valid else None


def as_parent(context: SpanContext | None) -> Context | None:
    """A context whose current span is ``context`` (None: the caller's current context)."""
    return None if context is None else set_span_in_context(NonRecordingSpan(context))


def _text(value: AttributeInput) -> str:
    value = value.value if isinstance(value, Attribute) else value
    return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)


def _valid(context: Context) -> SpanContext | None:
    span_context = get_current_span(context).get_span_context()
    return span_context if span_context.is_valid else None
