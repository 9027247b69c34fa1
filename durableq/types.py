"""The value objects of the public API: what callers pass in and get back."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

if TYPE_CHECKING:
    from .errors import DurableQError

__all__ = [
    "Attribute",
    "AttributeInput",
    "AuditEvent",
    "BatchFailure",
    "BatchResult",
    "BatchSuccess",
    "Message",
    "MinuteMetrics",
    "MoveTask",
    "PeekedMessage",
    "QueueStats",
    "RedriveAllowPolicy",
    "RedrivePolicy",
    "SendEntry",
    "SendResult",
]


@dataclass(frozen=True, slots=True)
class Attribute:
    """A typed message attribute: ``String``, ``Number`` or ``Binary``, optionally ``.label``-ed."""

    data_type: str
    value: str | bytes


#: What ``send`` accepts as an attribute value; plain values get their SQS type.
AttributeInput = str | int | float | bytes | Attribute


@dataclass(frozen=True, slots=True)
class SendEntry:
    """One message of ``Queue.send_batch``."""

    id: str
    body: str
    _: KW_ONLY
    delay_seconds: int | None = None
    attributes: Mapping[str, AttributeInput] | None = None
    group_id: str | None = None
    deduplication_id: str | None = None
    trace_header: str | None = None


# Results are plain (not frozen) dataclasses: they are built on every call,
# and a frozen dataclass costs several times more to construct.


@dataclass(slots=True)
class SendResult:
    """What a successful send returns."""

    message_id: str
    sequence_number: str | None
    md5_of_body: str


def md5_hex(text: str) -> str:
    """The MD5 digest SQS reports for a body: hex of the UTF-8 bytes."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def datetime_from_ms(ms: int) -> datetime:
    """A UTC datetime from epoch milliseconds (the database's time unit)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class Content(Protocol):
    """What a message stores somewhere other than its ``body`` text: a large payload, or sealed content
    this broker could not open (``error`` says why).  Read only when asked for."""

    def text(self) -> str: ...

    def md5(self) -> str: ...

    def open(self) -> BinaryIO: ...

    @property
    def error(self) -> DurableQError | None: ...


@dataclass(slots=True)
class Message:
    """A received message; ``receipt_handle`` is what delete and change-visibility need.

    ``sent_timestamp`` and ``first_receive_timestamp`` are epoch milliseconds
    (SQS's SentTimestamp and ApproximateFirstReceiveTimestamp); ``sent_at`` and
    ``first_received_at`` give them as UTC datetimes.  ``payload_size`` is set
    for a large payload stored outside the row (``large_payloads`` queues): its
    ``body`` is read from the payload store when first used, and
    :meth:`open_payload` streams it without holding it in memory.
    """

    message_id: str
    _text: str | None  # the body; None until read for a payload stored outside
    receipt_handle: str
    receive_count: int
    sent_timestamp: int
    first_receive_timestamp: int | None
    attributes: dict[str, Attribute] = field(default_factory=dict)
    group_id: str | None = None
    deduplication_id: str | None = None
    sequence_number: str | None = None
    dead_letter_source: str | None = None
    trace_header: str | None = None  # AWSTraceHeader, when the sender gave one
    payload_size: int | None = None  # bytes of a payload stored outside the row; None when inline
    _content: Content | None = field(default=None, repr=False, compare=False)

    @property
    def body(self) -> str:
        """The body as text (a payload stored outside is read, checked and kept on first use;
        MessageCorrupt if it fails its check, InvalidMessageContents if it is binary)."""
        text = self._text
        if text is None:
            assert self._content is not None
            text = self._text = self._content.text()
        return text

    @property
    def unreadable(self) -> DurableQError | None:
        """Why this message's content cannot be read, as found when it was received; None when it can.
        ``KmsAccessDenied`` or ``KmsNotFound``: it is sealed under a key this broker's keyring lacks
        (or holds other material under); ``MessageCorrupt``: its sealed content or data key fails its
        check.  Its ``body``, ``md5_of_body`` and ``open_payload()`` raise that error, and its
        ``attributes`` are empty.  It was received like any other: delete it, or let it come back (the
        queue's redrive policy counts it).  (A payload stored outside is checked as it is read.)"""
        return None if self._content is None else self._content.error

    def __repr__(self) -> str:
        # The body as ``body=`` (a payload stored outside is not read for a repr), then the other fields.
        unreadable = self.unreadable
        body = (
            f"<unreadable: {unreadable.code}>"
            if unreadable is not None
            else f"<payload of {self.payload_size} bytes>"
            if self._text is None and self.payload_size is not None
            else repr(self._text)
        )
        shown = [f"message_id={self.message_id!r}", f"body={body}"]
        shown += [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name not in ("message_id", "_text", "_content")
        ]
        return f"Message({', '.join(shown)})"

    def open_payload(self) -> BinaryIO:
        """The body as a binary file object: a payload stored outside is streamed from the payload store
        in checked chunks (read it before deleting the message); an inline body gives its UTF-8 bytes."""
        if self._content is not None:
            return self._content.open()
        return io.BytesIO(self.body.encode("utf-8"))

    @property
    def sent_at(self) -> datetime:
        return datetime_from_ms(self.sent_timestamp)

    @property
    def first_received_at(self) -> datetime | None:
        ts = self.first_receive_timestamp
        return None if ts is None else datetime_from_ms(ts)

    @property
    def md5_of_body(self) -> str:
        if self._content is not None:
            return self._content.md5()
        return md5_hex(self.body)


@dataclass(slots=True)
class PeekedMessage:
    """A message as ``Queue.peek`` shows it: its state, and no receipt handle (peeking receives nothing).

    ``body`` is None for a payload stored outside the row (``payload_size`` gives its size) and for an
    encrypted message this broker holds no key for (``encrypted`` is True; ``attributes`` are then
    empty): peek never needs the plaintext."""

    message_id: str
    body: str | None
    state: str  # "visible", "in_flight" or "delayed"
    receive_count: int
    sent_timestamp: int
    visible_timestamp: int  # when it is (or became) visible, epoch ms
    first_receive_timestamp: int | None
    attributes: dict[str, Attribute] = field(default_factory=dict)
    group_id: str | None = None
    deduplication_id: str | None = None
    sequence_number: str | None = None
    dead_letter_source: str | None = None
    payload_size: int | None = None
    encrypted: bool = False

    @property
    def sent_at(self) -> datetime:
        return datetime_from_ms(self.sent_timestamp)

    @property
    def visible_at(self) -> datetime:
        return datetime_from_ms(self.visible_timestamp)

    @property
    def first_received_at(self) -> datetime | None:
        ts = self.first_receive_timestamp
        return None if ts is None else datetime_from_ms(ts)


@dataclass(slots=True)
class BatchSuccess:
    """A batch entry that succeeded; the send fields are set for ``send_batch`` only."""

    id: str
    message_id: str | None = None
    sequence_number: str | None = None
    md5_of_body: str | None = None


@dataclass(slots=True)
class BatchFailure:
    """A batch entry that failed: ``code`` is an error class name of ``durableq.errors``; ``error`` is
    the error itself, with its fields (None where the failure was made by hand)."""

    id: str
    code: str
    message: str
    sender_fault: bool = True
    error: DurableQError | None = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class BatchResult:
    """The per-entry outcome of a batch call."""

    successful: list[BatchSuccess]
    failed: list[BatchFailure]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """Approximate depth of a queue by state, and the age of its oldest message in seconds."""

    approximate_number_of_messages: int
    approximate_number_of_messages_not_visible: int
    approximate_number_of_messages_delayed: int
    oldest_message_age: int


@dataclass(frozen=True, slots=True)
class MessageState:
    """A state a message is in: ``ops/states.py`` classifies rows into them."""

    name: str
    count: str  # the QueueStats field that counts the messages in it
    sqs: str  # SQS's queue attribute that counts them
    description: str


#: The states of a message, declared once, in the order stats, peek, reports and metrics list them.
MESSAGE_STATES = (
    MessageState(
        "visible",
        "approximate_number_of_messages",
        "ApproximateNumberOfMessages",
        "Messages ready to receive",
    ),
    MessageState(
        "in_flight",
        "approximate_number_of_messages_not_visible",
        "ApproximateNumberOfMessagesNotVisible",
        "Messages received, not deleted, not visible again",
    ),
    MessageState(
        "delayed",
        "approximate_number_of_messages_delayed",
        "ApproximateNumberOfMessagesDelayed",
        "Messages whose delay has not passed",
    ),
)


@dataclass(frozen=True, slots=True)
class MinuteMetrics:
    """Counters of one queue for one minute (``minute`` is its start, UTC).

    Every field after ``minute`` is a counter: this is their one declaration, which the
    ``queue_metrics`` table's writer (``ops/counters.py``), Spark's ``metrics()`` and the
    endpoint's Prometheus counters (each field's ``description`` is its help) read.
    """

    minute: datetime
    sent: int = field(metadata={"description": "Messages sent"})
    received: int = field(
        metadata={"description": "Messages received (a message received twice counts twice)"}
    )
    deleted: int = field(metadata={"description": "Messages deleted"})
    moved_to_dead_letter: int = field(
        metadata={"description": "Messages moved to the dead-letter queue by a receive"}
    )
    expired: int = field(metadata={"description": "Messages removed because their retention period passed"})
    empty_receives: int = field(metadata={"description": "Receives that returned no message"})
    moved_in: int = field(
        default=0,
        metadata={"description": "Messages that arrived by a dead-letter move or a message move task"},
    )
    moved_out: int = field(default=0, metadata={"description": "Messages that left by a message move task"})
    purged: int = field(default=0, metadata={"description": "Messages removed by purge"})


#: The per-minute counters (the fields of :class:`MinuteMetrics` after ``minute``) and what each counts.
COUNTERS: dict[str, str] = {
    f.name: f.metadata["description"] for f in fields(MinuteMetrics) if f.name != "minute"
}


@dataclass(frozen=True, slots=True)
class RedrivePolicy:
    """Send a message to ``dead_letter_queue`` instead of receiving it more than
    ``max_receive_count`` times (whether a received message's next receive does:
    ``Queue.dead_letter_due``)."""

    dead_letter_queue: str
    max_receive_count: int


@dataclass(frozen=True, slots=True)
class RedriveAllowPolicy:
    """Which queues may name this queue as their dead-letter queue."""

    permission: str = "allowAll"
    source_queues: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Accept any iterable of names but keep the object hashable and comparable.
        object.__setattr__(self, "source_queues", tuple(self.source_queues))


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One management call made on the file (``Broker.audit``): who, when, what, and how it ended."""

    event_id: int  # only grows: a reader can resume after the last one it saw
    at: datetime
    pid: int
    user: str  # the OS user of the process that made the call
    action: str  # SQS's name of the call: CreateQueue, SetQueueAttributes, PurgeQueue, ...
    queue: str | None
    outcome: str  # "OK", or the code of the error the call raised
    detail: dict[str, Any]  # what the call changed: attribute names, tag keys, a task handle, ...


@dataclass(frozen=True, slots=True)
class MessageEvent:
    """One thing that happened to a message of a queue that keeps history (``Queue.events``)."""

    event_id: int  # only grows, never reused: a reader can resume after the last one it saw
    at: datetime
    queue: str
    event: str  # sent, received, visibility_changed, deleted, moved_to_dead_letter, moved_out, ...
    message_id: str
    receive_count: int  # the message's receive count after the event
    other_queue: str | None = None  # a move's other end: where it went, or where it came from
    #: When the message becomes visible after the event: set on ``sent`` (later than ``at`` by the
    #: message's delay) and ``visibility_changed``; None for other events and for
    #: those written before schema revision 0011.
    visible_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class MoveTask:
    """A message move task, as stored; ``moved`` grows while it runs."""

    task_handle: str
    status: str
    source: str
    destination: str | None
    max_per_second: int | None
    moved: int
    to_move: int
    started_at: datetime
    failure_reason: str | None = None
