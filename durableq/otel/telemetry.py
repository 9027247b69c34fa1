"""The spans and metrics of durableq's messaging, per OpenTelemetry's semantic conventions for
messaging: what the instrumentor wraps around the public calls while it is on.

- ``send {queue}`` (producer) around ``send``, ``send_file`` and ``send_batch``: it is the messages' creation
  context, which travels in their attributes (``carrier.py``);
- ``receive {queue}`` (client) for ``receive`` and ``receive_async``, linked to the creation
  context of each message it returned (an empty receive: only its duration, unless
  ``trace_empty_receives``);
- ``process {queue}`` (consumer) around a worker's job (its handler and the delete or retry that
  follows), linked to the message's creation context, current while the handler runs (so the
  handler's own spans are its children), with the handler's failure recorded.

Metrics: ``messaging.client.operation.duration`` (s) of sends and receives,
``messaging.client.sent.messages`` and ``messaging.client.consumed.messages`` (messages), and
``messaging.process.duration`` (s) of a worker's jobs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import Meter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from .. import limits
from ..errors import BatchRequestTooLong, DurableQError, InvalidParameterValue, Reason
from ..handle import QueueHandle
from ..ops import attributes
from ..types import BatchResult, Message, SendEntry, SendResult
from . import carrier

SYSTEM = "durableq"
#: The conventions' advice for messaging durations (seconds).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)

MESSAGING_SYSTEM = "messaging.system"
DESTINATION = "messaging.destination.name"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
MESSAGE_ID = "messaging.message.id"
BATCH_COUNT = "messaging.batch.message_count"
ERROR_TYPE = "error.type"

Wrapped = Callable[..., Any]


@dataclass
class _Job:
    """The process span of the job running in this context, and its failure once known."""

    span: Span
    error: str | None = None


_job: ContextVar[_Job | None] = ContextVar("durableq_otel_job", default=None)


class Telemetry:
    """One instrumentation's tracer and instruments, and the wrappers (wrapt's signature:
    ``wrapper(wrapped, instance, args, kwargs)``) that use them."""

    def __init__(self, tracer: Tracer, meter: Meter, *, trace_empty_receives: bool = False) -> None:
        self.tracer = tracer
        self.trace_empty_receives = trace_empty_receives
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a messaging operation initiated by a producer or consumer client.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Number of messages sent."
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Number of messages received by a consumer.",
        )
        self.process_duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="Duration of processing operation.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    # -- send --------------------------------------------------------------------

    def send(
        self, wrapped: Wrapped, instance: QueueHandle, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        return self._send(wrapped, instance, args, kwargs, again=True)

    def send_file(
        self, wrapped: Wrapped, instance: QueueHandle, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        source = args[0] if args else kwargs.get("source")
        # A file object the refused send read is not read again; a path is opened anew.
        return self._send(wrapped, instance, args, kwargs, again=not hasattr(source, "read"))

    def _send(
        self,
        wrapped: Wrapped,
        instance: QueueHandle,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        again: bool,
    ) -> Any:
        attributes = kwargs.get("attributes")
        parent = carrier.creation_context(attributes, kwargs.get("trace_header"))
        with self._operation(instance, "send", SpanKind.PRODUCER, parent) as (span, metric):
            carried = carrier.with_context(attributes, span)
            try:
                result: SendResult = wrapped(*args, **{**kwargs, "attributes": carried})
            except InvalidParameterValue as exc:
                if not again or carried is attributes or exc.reason is not Reason.TOO_LARGE:
                    raise
                # The context's bytes took the message over its queue's size limit: instrumenting
                # must not refuse a send that would succeed without it.  The refused send stored
                # nothing; the message goes as the caller gave it, without a context.
                result = wrapped(*args, **kwargs)
            span.set_attribute(MESSAGE_ID, result.message_id)
        self.sent.add(1, metric)
        return result

    def send_batch(
        self, wrapped: Wrapped, instance: QueueHandle, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        entries = args[0] if args else kwargs.get("entries")
        rest = {k: v for k, v in kwargs.items() if k != "entries"}
        with self._operation(instance, "send", SpanKind.PRODUCER) as (span, metric):
            if not isinstance(entries, Sequence):  # the library's own refusal
                result: BatchResult = wrapped(*args, **kwargs)
            else:
                span.set_attribute(BATCH_COUNT, len(entries))
                carried = _that_fit(instance, entries, [_with_context(entry, span) for entry in entries])
                try:
                    result = wrapped(carried, *args[1:], **rest)
                except BatchRequestTooLong:
                    if all(c is e for c, e in zip(carried, entries)):
                        raise
                    result = wrapped(entries, *args[1:], **rest)  # see send(): as the caller gave them
                else:
                    result = _without_context_if_too_large(wrapped, args, rest, entries, carried, result)
        if result.successful:
            self.sent.add(len(result.successful), metric)
        return result

    # -- receive -----------------------------------------------------------------

    def receive(
        self, wrapped: Wrapped, instance: QueueHandle, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        start, started = time.time_ns(), time.perf_counter()
        try:
            messages: list[Message] = wrapped(*args, **kwargs)
        except BaseException as exc:
            self._received(instance, start, started, [], exc)
            raise
        self._received(instance, start, started, messages, None)
        return messages

    def receive_async(
        self, wrapped: Wrapped, instance: QueueHandle, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Awaitable[Any]:
        async def receiving() -> Any:
            start, started = time.time_ns(), time.perf_counter()
            try:
                messages: list[Message] = await wrapped(*args, **kwargs)
            except BaseException as exc:
                self._received(instance, start, started, [], exc)
                raise
            self._received(instance, start, started, messages, None)
            return messages

        return receiving()

    def _received(
        self,
        instance: QueueHandle,
        start: int,
        started: float,
        messages: list[Message],
        failure: BaseException | None,
    ) -> None:
        """A receive's span, made once it returned (so that it carries the links to its messages'
        creation contexts from its start, where samplers look for them), and its metrics.  A receive
        that returned nothing makes no span unless ``trace_empty_receives``: a worker polls about once
        a second, and a span for each empty poll would bury the traces that matter."""
        took = time.perf_counter() - started
        destination = instance.name
        metric = {MESSAGING_SYSTEM: SYSTEM, DESTINATION: destination, OPERATION_NAME: "receive"}
        if failure is not None:
            metric[ERROR_TYPE] = type(failure).__qualname__
        self.duration.record(took, metric)
        if messages:
            self.consumed.add(len(messages), metric)
        elif failure is None and not self.trace_empty_receives:
            return
        attributes: dict[str, str | int] = {**metric, OPERATION_TYPE: "receive", BATCH_COUNT: len(messages)}
        if len(messages) == 1:
            attributes[MESSAGE_ID] = messages[0].message_id
        links = [
            Link(created, {MESSAGE_ID: message.message_id})
            for message in messages
            if (created := carrier.of_message(message)) is not None
        ]
        span = self.tracer.start_span(
            f"receive {destination}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            links=links,
            start_time=start,
        )
        if failure is not None:
            span.record_exception(failure)
            span.set_status(Status(StatusCode.ERROR, f"{type(failure).__name__}: {failure}"))
        span.end()

    # -- process (a worker's job) ----------------------------------------------------

    def process(self, wrapped: Wrapped, instance: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Around ``Worker._handle(message)``: the job, in the thread that runs it."""
        message: Message = args[0] if args else kwargs["message"]
        destination = instance.queue.name
        created = carrier.of_message(message)
        attributes = {
            MESSAGING_SYSTEM: SYSTEM,
            DESTINATION: destination,
            OPERATION_NAME: "process",
            OPERATION_TYPE: "process",
            MESSAGE_ID: message.message_id,
        }
        started = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"process {destination}",
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=[Link(created)] if created is not None else None,
        ) as span:
            job = _Job(span)
            token = _job.set(job)
            try:
                return wrapped(*args, **kwargs)
            except BaseException as exc:  # recorded, then raised as it was
                job.error = type(exc).__qualname__
                raise
            finally:
                _job.reset(token)
                metric = {k: v for k, v in attributes.items() if k != MESSAGE_ID}
                if job.error is not None:
                    metric[ERROR_TYPE] = job.error
                self.process_duration.record(time.perf_counter() - started, metric)

    def finish(self, wrapped: Wrapped, instance: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Around ``Worker._finish(message, started, failure=...)``: the handler's failure, if any."""
        failure = kwargs.get("failure", args[2] if len(args) > 2 else None)
        if isinstance(failure, BaseException):
            _failed(failure, "the handler raised")
        return wrapped(*args, **kwargs)

    def rolled_back(
        self, wrapped: Wrapped, instance: Any, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        """Around ``worker_jobs.rolled_back(message, took, error)``: a transactional job whose
        acknowledgement failed (its handler's writes rolled back)."""
        error = kwargs.get("error", args[2] if len(args) > 2 else None)
        if isinstance(error, BaseException):
            _failed(error, "the job's transaction rolled back")
        return wrapped(*args, **kwargs)

    # -- shared ----------------------------------------------------------------------

    @contextmanager
    def _operation(
        self, instance: QueueHandle, operation: str, kind: SpanKind, parent: Any = None
    ) -> Iterator[tuple[Span, dict[str, str]]]:
        """A client operation's span and duration; a failure sets ``error.type`` on both."""
        destination = instance.name
        metric = {MESSAGING_SYSTEM: SYSTEM, DESTINATION: destination, OPERATION_NAME: operation}
        started = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"{operation} {destination}",
            context=carrier.as_parent(parent),
            kind=kind,
            attributes={**metric, OPERATION_TYPE: operation},
        ) as span:
            try:
                yield span, metric
            except BaseException as exc:
                span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
                self.duration.record(
                    time.perf_counter() - started, {**metric, ERROR_TYPE: type(exc).__qualname__}
                )
                raise  # the span records the exception and sets its status to error
        self.duration.record(time.perf_counter() - started, metric)


def _without_context_if_too_large(
    wrapped: Wrapped,
    args: Sequence[Any],
    rest: dict[str, Any],
    entries: Sequence[Any],
    carried: list[Any],
    result: BatchResult,
) -> BatchResult:
    """Entries that failed only because their context took them over the size limit (see ``send``),
    sent again as the caller gave them, in one more batch."""
    given = {e.id: e for e, c in zip(entries, carried) if c is not e}
    again = [
        given[failure.id]
        for failure in result.failed
        if failure.id in given and failure.error is not None and failure.error.reason is Reason.TOO_LARGE
    ]
    if not again:
        return result
    retried: BatchResult = wrapped(again, *args[1:], **rest)
    ids = {entry.id for entry in again}
    return BatchResult(
        successful=[*result.successful, *retried.successful],
        failed=[*(f for f in result.failed if f.id not in ids), *retried.failed],
    )


def _that_fit(instance: QueueHandle, entries: Sequence[Any], carried: list[Any]) -> list[Any]:
    """``carried``, but an entry its context would take over the queue's size limit goes as given.

    Decided before the batch is sent: were it refused and sent again afterwards, the entries behind
    it would be stored before it, and a FIFO group's order is the one thing a FIFO queue promises.
    Only a batch with an entry above the smallest limit SQS allows reads the queue's own limit."""
    sizes = [_size(entry) for entry in carried]
    if all(size <= limits.MIN_MAXIMUM_MESSAGE_SIZE for size in sizes):
        return carried
    read = getattr(instance, "attributes", None)  # a queue's own limit; a virtual queue's: the least
    limit = read()["maximum_message_size"] if read is not None else limits.MIN_MAXIMUM_MESSAGE_SIZE
    return [c if size <= limit else e for e, c, size in zip(entries, carried, sizes)]


def _size(entry: Any) -> int:
    """Bytes ``entry`` counts toward the size limit, as the library counts them (0 when it is not
    a valid entry: the library refuses it with its own error)."""
    if not isinstance(entry, SendEntry) or not isinstance(entry.body, str):
        return 0
    try:
        return len(entry.body.encode()) + attributes.size(attributes.normalize(entry.attributes))
    except (DurableQError, UnicodeError):
        return 0


def _with_context(entry: Any, span: Span) -> Any:
    if not isinstance(entry, SendEntry):
        return entry  # the library refuses it with its own error
    attributes = carrier.with_context(entry.attributes, span)
    return entry if attributes is entry.attributes else dataclasses.replace(entry, attributes=attributes)


def _failed(error: BaseException, description: str) -> None:
    job = _job.get()
    if job is None:
        return
    job.error = type(error).__qualname__
    job.span.record_exception(error)
    job.span.set_status(Status(StatusCode.ERROR, f"{description}: {type(error).__name__}: {error}"))
    job.span.set_attribute(ERROR_TYPE, job.error)
