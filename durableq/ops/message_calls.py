"""The message calls of a queue handle (send, receive, delete, change visibility, respond, one at a
time and in batches), each a whole call.

Each one checks its arguments, opens its transaction (a single statement where that is atomic by
itself: a standard queue's send, delete or visibility change), and does what must follow: the payload
files of a send that did not commit are removed, and those of the messages a call deleted.  The public
methods of the handles (``handle.py``) are one call each to this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import BinaryIO

from .. import limits, validation
from ..engines.base import Connection
from ..errors import BatchRequestTooLong, DurableQError, InvalidParameterValue, Reason
from ..types import AttributeInput, BatchResult, BatchSuccess, Message, SendEntry, SendResult
from . import batch, joined, replies, send, visibility
from . import offload as offloading  # (`offload` is a keyword of send)
from .runtime import Runtime
from .send import Outgoing
from .waiting_receive import WaitingReceive


@dataclass(frozen=True, slots=True)
class QueueRef:
    """The messages a handle works on: those of queue ``name``, or of its virtual queue ``virtual``."""

    name: str
    fifo: bool
    virtual: str | None = None


def _atomic(rt: Runtime, to: QueueRef) -> AbstractContextManager[Connection]:
    """Where a one-message operation runs: on a standard queue it is a single
    statement, atomic by itself; on a FIFO queue the group rows change too."""
    return rt.db.write() if to.fifo else rt.db.change()


# -- send ---------------------------------------------------------------------


def send_message(
    rt: Runtime,
    to: QueueRef,
    body: str,
    *,
    delay_seconds: int | None,
    attributes: Mapping[str, AttributeInput] | None,
    group_id: str | None,
    deduplication_id: str | None,
    trace_header: str | None,
    offload: bool,
) -> SendResult:
    item = send.check(
        body,
        delay_seconds=delay_seconds,
        attributes=attributes,
        group_id=group_id,
        deduplication_id=deduplication_id,
        trace_header=trace_header,
    )
    return _send(rt, to, _offloaded(rt, to, item) if offload else item)


def send_file(
    rt: Runtime,
    to: QueueRef,
    source: str | os.PathLike[str] | BinaryIO,
    *,
    delay_seconds: int | None,
    attributes: Mapping[str, AttributeInput] | None,
    group_id: str | None,
    deduplication_id: str | None,
    trace_header: str | None,
) -> SendResult:
    item = send.check(
        "-",  # the body comes from the file; every other part is checked as for send()
        delay_seconds=delay_seconds,
        attributes=attributes,
        group_id=group_id,
        deduplication_id=deduplication_id,
        trace_header=trace_header,
    )
    with rt.db.statement() as conn:
        queue = rt.catalog.get(conn, to.name)
    return _send(rt, to, offloading.from_file(item, source, queue, rt.payloads))


def _offloaded(rt: Runtime, to: QueueRef, item: Outgoing) -> Outgoing:
    """``item``, its body in the payload store if the queue takes large payloads and it is too large."""
    if item.size <= limits.MIN_MAXIMUM_MESSAGE_SIZE:  # fits every queue
        return item
    with rt.db.statement() as conn:
        queue = rt.catalog.get(conn, to.name)
    return offloading.offload(item, queue, rt.payloads)


def _offloaded_entry(rt: Runtime, to: QueueRef, item: Outgoing | DurableQError) -> Outgoing | DurableQError:
    """A batch entry, offloaded like :func:`_offloaded`; what fails to store fails that entry alone."""
    if isinstance(item, DurableQError):
        return item
    try:
        return _offloaded(rt, to, item)
    except DurableQError as exc:
        return exc


def _abandon(rt: Runtime, items: Sequence[Outgoing]) -> None:
    """Remove the payload files of messages that were not sent (see ``Payloads.abandon``)."""
    for item in items:
        if item.payload is not None:
            rt.payloads.abandon(item.payload.ref)


def _send(rt: Runtime, to: QueueRef, item: Outgoing) -> SendResult:
    try:
        if not to.fifo:
            with rt.db.change() as conn:
                return send.send_one(
                    conn, rt.catalog, to.name, item, rt.now_ms(), rt.counters, rt.sealer, to.virtual
                )
        with rt.db.write() as conn:
            queue = rt.catalog.get(conn, to.name, fresh=True)
            (result,) = send.insert(conn, queue, [item], rt.now_ms(), rt.counters, rt.sealer)
    except DurableQError:  # the write did not happen (an interrupt may come while it commits:
        _abandon(rt, [item])  # then the orphan sweep decides, once the file is old enough)
        raise
    if isinstance(result, DurableQError):
        _abandon(rt, [item])
        raise result
    return result


def send_batch(rt: Runtime, to: QueueRef, entries: Sequence[SendEntry], offload: bool) -> BatchResult:
    if not isinstance(entries, Sequence) or not all(isinstance(e, SendEntry) for e in entries):
        raise InvalidParameterValue("send_batch takes a list of durableq.SendEntry")
    ids = validation.batch_ids([e.id for e in entries])
    checked: list[Outgoing | DurableQError] = []
    for entry in entries:
        try:
            checked.append(
                send.check(
                    entry.body,
                    delay_seconds=entry.delay_seconds,
                    attributes=entry.attributes,
                    group_id=entry.group_id,
                    deduplication_id=entry.deduplication_id,
                    trace_header=entry.trace_header,
                )
            )
        except DurableQError as exc:
            checked.append(exc)
    if offload:  # first: the batch's byte limit counts what stays in the rows, as SQS's extended client
        checked = [_offloaded_entry(rt, to, item) for item in checked]
    valid = [item for item in checked if isinstance(item, Outgoing)]
    total = sum(item.size for item in valid)
    if total > limits.MAX_BATCH_BYTES:
        _abandon(rt, valid)
        raise BatchRequestTooLong(
            template="the messages of the batch add up to {value} bytes; at most {high} are allowed",
            parameter="entries",
            value=total,
            high=limits.MAX_BATCH_BYTES,
            reason=Reason.TOO_LARGE,
        )
    try:
        with rt.db.write() as conn:
            queue = rt.catalog.get(conn, to.name, fresh=True)
            outcomes = send.insert(conn, queue, valid, rt.now_ms(), rt.counters, rt.sealer, to.virtual)
    except DurableQError:  # the batch was not written (after an interrupt: the orphan sweep decides)
        _abandon(rt, valid)
        raise
    _abandon(rt, [item for item, outcome in zip(valid, outcomes) if isinstance(outcome, DurableQError)])
    inserted = iter(outcomes)
    successful, failed = [], []
    for entry_id, checked_entry in zip(ids, checked):
        outcome = checked_entry if isinstance(checked_entry, DurableQError) else next(inserted)
        if isinstance(outcome, DurableQError):
            failed.append(batch.failure(entry_id, outcome))
        else:
            successful.append(
                BatchSuccess(entry_id, outcome.message_id, outcome.sequence_number, outcome.md5_of_body)
            )
    return BatchResult(successful, failed)


# -- receive ------------------------------------------------------------------


def receive(
    rt: Runtime,
    to: QueueRef,
    max_messages: int,
    visibility_timeout: int | None,
    wait_time: int | None,
    attempt_id: str | None,
) -> list[Message]:
    _check_receive(max_messages, visibility_timeout, wait_time, attempt_id)
    if rt.in_transaction:
        wait_time = joined.no_wait(wait_time)
    return rt.receiver.receive(to.name, max_messages, visibility_timeout, wait_time, attempt_id, to.virtual)


async def receive_async(
    rt: Runtime,
    to: QueueRef,
    max_messages: int,
    visibility_timeout: int | None,
    wait_time: int | None,
    attempt_id: str | None,
    executor: Executor | None,
) -> list[Message]:
    _check_receive(max_messages, visibility_timeout, wait_time, attempt_id)
    return await rt.receiver.receive_async(
        to.name, max_messages, visibility_timeout, wait_time, attempt_id, executor, to.virtual
    )


def receive_start(
    rt: Runtime,
    to: QueueRef,
    max_messages: int,
    visibility_timeout: int | None,
    wait_time: int | None,
    attempt_id: str | None,
) -> list[Message] | WaitingReceive:
    _check_receive(max_messages, visibility_timeout, wait_time, attempt_id)
    return rt.receiver.start(to.name, max_messages, visibility_timeout, wait_time, attempt_id, to.virtual)


def put_back(rt: Runtime, to: QueueRef, messages: list[Message], attempt_id: str | None) -> None:
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, Message) for m in messages):
        raise InvalidParameterValue("put_back takes the list of durableq.Message a receive returned")
    if attempt_id is not None:
        validation.fifo_id("attempt_id", attempt_id)
    rt.receiver.put_back(to.name, list(messages), attempt_id)


def _check_receive(
    max_messages: int, visibility_timeout: int | None, wait_time: int | None, attempt_id: str | None
) -> None:
    validation.integer("max_messages", max_messages, 1, limits.MAX_MESSAGES_PER_RECEIVE, "messages")
    if visibility_timeout is not None:
        validation.integer("visibility_timeout", visibility_timeout, 0, limits.MAX_VISIBILITY_TIMEOUT)
    if wait_time is not None:
        validation.integer("wait_time", wait_time, 0, limits.MAX_RECEIVE_WAIT_TIME)
    if attempt_id is not None:
        validation.fifo_id("attempt_id", attempt_id)


# -- delete, visibility, respond ----------------------------------------------


def delete(rt: Runtime, to: QueueRef, receipt_handle: str) -> None:
    with _atomic(rt, to) as conn:
        visibility.delete(conn, rt.catalog, to.name, receipt_handle, rt.now_ms(), rt.counters)
    rt.payloads.settle()  # the file of the message, if it had one


def delete_batch(rt: Runtime, to: QueueRef, entries: Sequence[str | tuple[str, str]]) -> BatchResult:
    rows = batch.entries_with_ids(entries, 1, "a receipt handle or an (id, receipt handle) pair")
    ids = validation.batch_ids([row[0] for row in rows])
    with rt.db.write() as conn:
        queue = rt.catalog.get(conn, to.name, fresh=True)  # the queue must exist, even if every entry fails
        now = rt.now_ms()
        if queue.fifo:
            result = batch.each(
                ids, lambda i: visibility.delete(conn, rt.catalog, to.name, rows[i][1], now, rt.counters)
            )
        else:
            result = batch.outcomes(
                ids, visibility.delete_many(conn, queue, [row[1] for row in rows], now, rt.counters)
            )
    rt.payloads.settle()  # the files of the messages deleted
    return result


def change_visibility(
    rt: Runtime, to: QueueRef, receipt_handle: str, timeout: int, *, up_to_cap: bool = False
) -> int:
    with _atomic(rt, to) as conn:
        return visibility.change(
            conn, rt.catalog, to.name, receipt_handle, timeout, rt.now_ms(), up_to_cap=up_to_cap
        )


def change_visibility_batch(
    rt: Runtime, to: QueueRef, entries: Sequence[tuple[str, int] | tuple[str, str, int]]
) -> BatchResult:
    rows = batch.entries_with_ids(entries, 2, "a (receipt handle, timeout) pair or (id, handle, timeout)")
    ids = validation.batch_ids([row[0] for row in rows])
    with rt.db.write() as conn:
        rt.catalog.get(conn, to.name, fresh=True)  # the queue must exist, even if every entry fails
        now = rt.now_ms()
        return batch.each(
            ids, lambda i: visibility.change(conn, rt.catalog, to.name, rows[i][1], rows[i][2], now)
        )


def respond(
    rt: Runtime,
    to: QueueRef,
    request: Message,
    body: str,
    attributes: Mapping[str, AttributeInput] | None,
) -> SendResult | None:
    item = send.check(body, attributes=replies.reply_attributes(request, attributes))
    with rt.db.write() as conn:
        rt.catalog.get(conn, to.name, fresh=True)  # the request queue must exist
        result = replies.respond(
            conn, rt.catalog, to.name, request, item, rt.now_ms(), rt.counters, rt.sealer
        )
    rt.payloads.settle()  # the file of the request, if it had one
    return result
