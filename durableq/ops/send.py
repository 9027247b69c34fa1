"""Sending: checking messages, the insert, FIFO deduplication and sequence numbers."""

from __future__ import annotations

import hashlib
import os
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from .. import limits, validation
from ..engines.base import Connection
from ..errors import (
    DurableQError,
    InvalidParameterValue,
    MissingParameter,
    QueueDoesNotExist,
    Reason,
)
from ..types import Attribute, SendResult, md5_hex
from . import attributes as attrs
from . import fairness, fifo, history
from .counters import SENT, Counters
from .message_rows import format_sequence
from .payloads import StoredPayload
from .queue_rows import Catalog, QueueConfig
from .sealing import DataKey, Fields, Sealer, seal_fields

# Selecting the queue row makes the insert itself check, atomically, that the
# queue (a cached id: ids are never reused) still exists, that the message fits
# its current size limit, that it still encrypts as the message was sealed, and
# read its current delay.
_INSERT = """
INSERT INTO durableq_messages
  (queue_id, message_id, body, attributes, enqueued_at, visible_at, group_id, deduplication_id, sequence,
   trace_header, virtual, data_key_id, payload_ref, payload_size, payload_meta)
SELECT id, :message_id, :body, :attributes, :now, :now + coalesce(:delay, delay_seconds) * 1000,
       :group_id, :deduplication_id, :sequence, :trace_header, :virtual, :data_key_id, :payload_ref,
       :payload_size, :payload_meta
FROM durableq_queues WHERE id = :queue_id AND maximum_message_size >= :size
  AND coalesce(kms_master_key_id, '') = :kms_key AND sqs_managed_sse_enabled = :sse
"""
# The same for the common message: plaintext, inline, no FIFO ids, trace header or virtual queue.  The
# driver binds a named parameter by looking it up in the row's dict, one lookup per parameter and row:
# nine instead of eighteen make a plain send ~5 µs cheaper, a batch of ten ~50 µs (issue 30).
_INSERT_PLAIN = """
INSERT INTO durableq_messages (queue_id, message_id, body, attributes, enqueued_at, visible_at)
SELECT id, :message_id, :body, :attributes, :now, :now + coalesce(:delay, delay_seconds) * 1000
FROM durableq_queues WHERE id = :queue_id AND maximum_message_size >= :size
  AND coalesce(kms_master_key_id, '') = :kms_key AND sqs_managed_sse_enabled = :sse
"""


@dataclass(slots=True)
class Outgoing:
    """A message whose queue-independent checks passed.  A large payload (``payload``) is already in the
    payload store; its ``body`` is then empty and ``size`` counts its attributes only."""

    body: str
    attributes: dict[str, Attribute]
    size: int
    delay_seconds: int | None
    group_id: str | None
    deduplication_id: str | None
    trace_header: str | None
    payload: StoredPayload | None = None

    def md5(self) -> str:
        return md5_hex(self.body) if self.payload is None else self.payload.md5

    def sha256(self) -> str:
        if self.payload is not None:
            return self.payload.sha256
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()


def check(
    body: object,
    *,
    delay_seconds: object = None,
    attributes: Any = None,
    group_id: object = None,
    deduplication_id: object = None,
    trace_header: object = None,
) -> Outgoing:
    """Everything about a message that does not depend on its queue."""
    text = validation.body(body)
    typed = attrs.normalize(attributes)
    if delay_seconds is not None:
        validation.integer("delay_seconds", delay_seconds, 0, limits.MAX_DELAY_SECONDS)
    if group_id is not None:
        validation.fifo_id("group_id", group_id)
    if deduplication_id is not None:
        validation.fifo_id("deduplication_id", deduplication_id)
    if trace_header is not None:
        validation.trace_header(trace_header)
    return Outgoing(
        body=text,
        attributes=typed,
        size=len(text.encode("utf-8")) + (attrs.size(typed) if typed else 0),
        delay_seconds=delay_seconds,  # type: ignore[arg-type]
        group_id=group_id,  # type: ignore[arg-type]
        deduplication_id=deduplication_id,  # type: ignore[arg-type]
        trace_header=trace_header,  # type: ignore[arg-type]
    )


def new_message_id() -> str:
    """A random (version 4) UUID as text, without building a ``uuid.UUID`` object."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def send_one(
    conn: Connection,
    catalog: Catalog,
    name: str,
    item: Outgoing,
    now: int,
    counters: Counters,
    sealer: Sealer,
    virtual: str | None = None,
) -> SendResult:
    """Send one message to standard queue ``name`` (to its virtual queue ``virtual``, if given): a
    single statement, atomic by itself.

    The queue row comes from the catalog's cache; if the insert matches no
    queue row, the row is read afresh to say why (or to retry a recreated queue,
    or one whose encryption changed).
    """
    _refuse_deduplication_id(name, item)
    message_id = new_message_id()
    queue = catalog.get(conn, name)
    # A queue's first tenant marks it in the same commit as the message (fairness.mark).
    first_tenant = item.group_id is not None and not queue.grouped
    with conn.one_write() if first_tenant else nullcontext(), history.atomic(conn, queue):
        key = sealer.data_key(conn, queue, now)
        row = _row(queue, message_id, item, item.delay_seconds, now, item.group_id, virtual=virtual, key=key)
        if conn.execute(_statement(row), row).rowcount != 1:
            queue = catalog.get(conn, name, fresh=True)  # QueueDoesNotExist if it is gone
            _check_for_queue(queue, item)
            key = sealer.data_key(conn, queue, now)
            row = _row(
                queue, message_id, item, item.delay_seconds, now, item.group_id, virtual=virtual, key=key
            )
            if conn.execute(_statement(row), row).rowcount != 1:
                raise QueueDoesNotExist(f"queue {name!r} does not exist")
        if item.group_id is not None and not queue.grouped:
            fairness.mark(conn, queue, catalog)  # its first tenant: receives are fair from now on
        history.record_sent(conn, queue, now, [(message_id, _visible_at(queue, item.delay_seconds, now))])
    counters.add(name, now, SENT)
    return SendResult(message_id, None, item.md5())


def insert(
    conn: Connection,
    queue: QueueConfig,
    items: list[Outgoing],
    now: int,
    counters: Counters,
    sealer: Sealer,
    virtual: str | None = None,
) -> list[SendResult | DurableQError]:
    """Insert ``items`` in order, in the caller's write transaction (into the virtual queue
    ``virtual`` of a standard queue, if given); one result or error each."""
    if virtual is not None:
        validation.virtual_host(queue.name, queue.fifo)
    key = sealer.data_key(conn, queue, now) if items else None
    if queue.fifo:
        return _insert_fifo(conn, queue, items, now, counters, key)
    results: list[SendResult | DurableQError] = []
    rows, sent = [], []
    for item in items:
        try:
            _check_for_queue(queue, item)
            _refuse_deduplication_id(queue.name, item)
        except DurableQError as exc:
            results.append(exc)
            continue
        message_id = new_message_id()
        rows.append(
            _row(queue, message_id, item, item.delay_seconds, now, item.group_id, virtual=virtual, key=key)
        )
        sent.append((message_id, _visible_at(queue, item.delay_seconds, now)))
        results.append(SendResult(message_id, None, item.md5()))
    if rows:
        # The queue row is fresh in this transaction and every size was checked: one executemany per
        # run of rows of one statement, in order (mostly one run: a batch shares its key and virtual
        # queue; a body in the payload store or a trace header takes the full statement).
        for statement, run in groupby(rows, _statement):
            conn.executemany(statement, run)
        if not queue.grouped and any(row.get("group_id") is not None for row in rows):
            fairness.mark(conn, queue)
        history.record_sent(conn, queue, now, sent)
        counters.add(queue.name, now, SENT, len(rows))
    return results


def _refuse_deduplication_id(name: str, item: Outgoing) -> None:
    """A standard queue refuses a deduplication id.  It keeps a group id (SQS's fair queues: the
    message's tenant), which makes its receives fair (``fairness.py``)."""
    if item.deduplication_id is not None:
        raise InvalidParameterValue(
            template="{deduplication_id} applies to FIFO queues only; {queue!r} is a standard queue",
            parameter="deduplication_id",
            value=item.deduplication_id,
            queue=name,
            reason=Reason.FIFO_ONLY,
        )


def _check_for_queue(queue: QueueConfig, item: Outgoing) -> None:
    if item.size > queue.maximum_message_size:
        raise InvalidParameterValue(
            template="the message is {value} bytes (body plus attribute names, types and values "
            "in UTF-8); queue {queue!r} allows at most {high}",
            parameter="message",
            value=item.size,
            high=queue.maximum_message_size,
            queue=queue.name,
            reason=Reason.TOO_LARGE,
        )


def _statement(row: dict[str, object]) -> str:
    """The insert of a row of :func:`_row`: :data:`_INSERT_PLAIN` for a plain message."""
    return _INSERT if "group_id" in row else _INSERT_PLAIN


def _row(
    queue: QueueConfig,
    message_id: str,
    item: Outgoing,
    delay: int | None,
    now: int,
    group_id: str | None = None,
    dedup_id: str | None = None,
    sequence: int | None = None,
    virtual: str | None = None,
    key: DataKey | None = None,
) -> dict[str, object]:
    """The parameters of :func:`_statement`'s insert for one message, sealed with ``key`` if given."""
    payload = item.payload
    if payload is None and key is None and group_id is None and virtual is None and item.trace_header is None:
        return {  # the parameters of _INSERT_PLAIN (see _statement)
            "queue_id": queue.id,
            "kms_key": queue.kms_master_key_id or "",
            "sse": queue.sqs_managed_sse_enabled,
            "message_id": message_id,
            "body": item.body,
            "attributes": attrs.encode(item.attributes) if item.attributes else None,
            "now": now,
            "delay": delay,
            "size": item.size,
        }
    fields: Fields = (
        item.body,
        attrs.encode(item.attributes) if item.attributes else None,
        None if payload is None else payload.meta(),
    )
    if key is not None:
        fields = seal_fields(key.aead, message_id, fields)
    body, stored_attributes, meta = fields
    return {
        "queue_id": queue.id,
        "kms_key": queue.kms_master_key_id or "",
        "sse": queue.sqs_managed_sse_enabled,
        "data_key_id": None if key is None else key.id,
        "payload_ref": None if payload is None else payload.ref,
        "payload_size": None if payload is None else payload.size,
        "payload_meta": meta,
        "message_id": message_id,
        "body": body,
        "attributes": stored_attributes,
        "now": now,
        "delay": delay,
        "size": item.size,
        "group_id": group_id,
        "deduplication_id": dedup_id,
        "sequence": sequence,
        "trace_header": item.trace_header,
        "virtual": virtual,
    }


def _visible_at(queue: QueueConfig, delay: int | None, now: int) -> int:
    """When a message sent at ``now`` with ``delay`` becomes visible: the rule of :data:`_INSERT`'s
    ``visible_at``, for its history event (the queue's delay as the caller's queue row knows it)."""
    return now + (queue.delay_seconds if delay is None else delay) * 1000


def _insert_fifo(
    conn: Connection,
    queue: QueueConfig,
    items: list[Outgoing],
    now: int,
    counters: Counters,
    key: DataKey | None,
) -> list[SendResult | DurableQError]:
    for item in items:  # as SQS does, an entry without its ids fails the whole batch: nothing is sent
        _fifo_ids_given(queue, item)
    (sequence,) = conn.execute(
        "SELECT next_sequence FROM durableq_queues WHERE id = ?", (queue.id,)
    ).fetchone()
    start = sequence
    results: list[SendResult | DurableQError] = []
    for item in items:
        try:
            group_id, dedup_id = _fifo_checks(queue, item)
        except DurableQError as exc:
            results.append(exc)
            continue
        scope = group_id if queue.deduplication_scope == "messageGroup" else ""
        original = fifo.find_duplicate(conn, queue.id, scope, dedup_id, now)
        if original is not None:  # accepted, but nothing is enqueued
            results.append(SendResult(original[0], format_sequence(original[1]), item.md5()))
            continue
        sequence += 1
        message_id = new_message_id()
        row = _row(queue, message_id, item, None, now, group_id, dedup_id, sequence, key=key)
        conn.execute(_statement(row), row)
        fifo.remember(conn, queue.id, scope, dedup_id, message_id, sequence, now)
        fifo.add_to_group(conn, queue.id, group_id, now + queue.delay_seconds * 1000)
        history.record_sent(conn, queue, now, [(message_id, _visible_at(queue, None, now))])
        results.append(SendResult(message_id, format_sequence(sequence), item.md5()))
    if sequence != start:
        conn.execute("UPDATE durableq_queues SET next_sequence = ? WHERE id = ?", (sequence, queue.id))
        counters.add(queue.name, now, SENT, sequence - start)
    return results


def _fifo_checks(queue: QueueConfig, item: Outgoing) -> tuple[str, str]:
    """The FIFO rules of a send; returns the group id and the deduplication id to use."""
    _check_for_queue(queue, item)
    group_id = _fifo_ids_given(queue, item)
    if item.delay_seconds not in (None, 0):
        raise InvalidParameterValue(
            template="FIFO queue {queue!r} accepts only {parameter}=0 per message; "
            "set the queue's {parameter} instead",
            parameter="delay_seconds",
            value=item.delay_seconds,
            queue=queue.name,
            reason=Reason.STANDARD_ONLY,
        )
    if item.deduplication_id is not None:
        return group_id, item.deduplication_id
    return group_id, item.sha256()


def _fifo_ids_given(queue: QueueConfig, item: Outgoing) -> str:
    """Every FIFO send names its group (returned), and its deduplication id unless the queue derives it."""
    if item.group_id is None:
        raise MissingParameter(
            template="{parameter} is required for every message sent to FIFO queue {queue!r}",
            parameter="group_id",
            queue=queue.name,
            reason=Reason.MISSING,
        )
    if item.deduplication_id is None and not queue.content_based_deduplication:
        raise MissingParameter(
            template="{parameter} is required: FIFO queue {queue!r} does not use content-based deduplication",
            parameter="deduplication_id",
            queue=queue.name,
            reason=Reason.MISSING,
        )
    return item.group_id
