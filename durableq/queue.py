"""``Queue``: the public handle on one queue; every method is one library call."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, BinaryIO

from . import limits
from .engines.base import Connection, Database
from .errors import BatchRequestTooLong, DurableQError, InvalidParameterValue, Reason
from .ops import (
    audit,
    batch,
    history,
    peek,
    permissions,
    queue_rows,
    replies,
    send,
    settings,
    stats,
    validation,
    visibility,
)
from .ops import offload as offloading  # (`offload` is a keyword of send)
from .ops.counters import PURGED
from .ops.runtime import Runtime
from .ops.send import Outgoing
from .options import OpenOptions
from .types import (
    AttributeInput,
    BatchResult,
    BatchSuccess,
    Message,
    MessageEvent,
    MinuteMetrics,
    PeekedMessage,
    QueueStats,
    RedrivePolicy,
    SendEntry,
    SendResult,
)


def _this_queue(queue: Queue, *args: object, **kwargs: object) -> str:
    """The queue an audited method of a Queue acts on: its own (``HOST#NAME`` for a virtual queue)."""
    return queue.name


class Queue:
    """A queue of an open broker.  Cheap to create; safe to share between threads."""

    #: The virtual queue of the queue that sends and receives go to (:class:`~durableq.VirtualQueue`).
    _virtual: str | None = None

    def __init__(self, runtime: Runtime, name: str, fifo: bool) -> None:
        self._rt = runtime
        self._name = name
        self._fifo = fifo

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        audit.cover_overrides(cls)  # a subclass's refusal of a management call is recorded as the call's

    @property
    def name(self) -> str:
        return self._name

    @property
    def fifo(self) -> bool:
        return self._fifo

    @property
    def _options(self) -> OpenOptions:
        """How this queue's broker was opened (what another process reopens it from)."""
        return self._rt.options

    def __repr__(self) -> str:
        kind = "FIFO" if self._fifo else "standard"
        return f"<durableq.Queue {self._name!r} ({kind}) in {self._rt.db.name!r}>"

    # -- settings and state ---------------------------------------------------

    def _atomic(self) -> AbstractContextManager[Connection]:
        """Where a one-message operation runs: on a standard queue it is a single
        statement, atomic by itself; on a FIFO queue the group rows change too."""
        return self._rt.db.write() if self._fifo else self._rt.db.change()

    @property
    def _audit_target(self) -> tuple[Database, Callable[[], int]]:
        return self._rt.db, self._rt.now_ms

    def _fresh(self, conn: Connection) -> queue_rows.QueueConfig:
        """The queue row as of now (inside a transaction: as of that transaction)."""
        return self._rt.catalog.get(conn, self._name, fresh=True)

    def attributes(self) -> dict[str, Any]:
        """The queue's settings, and when it was created and last changed."""
        with self._rt.db.statement() as conn:
            return settings.attributes(self._fresh(conn))

    def dead_letter_due(self, message: Message) -> RedrivePolicy | None:
        """The redrive policy that moves ``message`` (as received) to its dead-letter queue at its next
        receive, instead of returning it: it was received ``max_receive_count`` times and that queue
        exists.  None: its next receive returns it (as in SQS when the dead-letter queue is gone).
        The move itself happens inside that receive's transaction."""
        with self._rt.db.statement() as conn:
            return self._rt.dead_letters.due(conn, self._fresh(conn), message.receive_count)

    @audit.audited("SetQueueAttributes", _this_queue)
    def set_attributes(self, /, **changes: Any) -> None:
        """Change settings (the keyword names of ``create_queue``, except ``fifo`` and ``tags``)."""
        with self._rt.db.write() as conn:
            now = self._rt.now_ms()
            settings.update(conn, self._fresh(conn), changes, now)
            audit.record(conn, now, "SetQueueAttributes", self._name, detail={"attributes": sorted(changes)})
        self._rt.catalog.forget(self._name)

    def stats(self) -> QueueStats:
        """Approximate depth by state and the age of the oldest message; reads no full table."""
        with self._rt.db.write() as conn:
            queue = self._fresh(conn)
            now = self._rt.now_ms()
            self._rt.sweeper.maybe_sweep(conn, queue, now)
            result = stats.queue_stats(conn, queue, now)
        self._rt.payloads.settle()  # the files of messages the sweep removed
        return result

    def metrics(self, since: datetime | None = None) -> list[MinuteMetrics]:
        """Per-minute counters (sent, received, deleted, moved, expired, empty receives), oldest first."""
        start = 0 if since is None else validation.moment("since", since)
        self._rt.counters.flush()  # so this process sees its own latest counts
        with self._rt.db.read() as conn:
            return stats.minute_metrics(conn, self._fresh(conn), start)

    def events(
        self,
        *,
        since: datetime | None = None,
        after: int | None = None,
        limit: int = limits.DEFAULT_EVENT_LIMIT,
    ) -> list[MessageEvent]:
        """The queue's message history, oldest first (kept only while the queue's ``history`` is on):
        sent, received, visibility_changed, deleted, moved_to_dead_letter, moved_out, moved_in, expired,
        purged.  ``since``: from that time on; ``after``: events whose ``event_id`` is above it (to
        resume); at most ``limit`` (1-100,000)."""
        start = None if since is None else validation.moment("since", since)
        if after is not None:
            validation.integer("after", after, 0, limits.MAX_EVENT_ID, "(an event_id)")
        validation.integer("limit", limit, 1, limits.MAX_EVENT_LIMIT, "events")
        with self._rt.db.settled_read() as conn:  # so that resuming after an id misses none
            return history.events(conn, queue=self._fresh(conn), since=start, after=after or 0, limit=limit)

    def peek(self, *, state: str | None = None, limit: int = limits.DEFAULT_PEEK) -> list[PeekedMessage]:
        """Look at messages (oldest first) without receiving them: nothing about them changes.

        ``state`` is ``"visible"``, ``"in_flight"``, ``"delayed"`` or None for all.
        """
        with self._rt.db.read() as conn:
            return peek.peek(conn, self._fresh(conn), state, limit, self._rt.now_ms(), self._rt.sealer)

    @audit.audited("AddPermission", _this_queue)
    def add_permission(
        self, label: str, account_ids: Sequence[str], actions: Sequence[str], *, resource: str | None = None
    ) -> None:
        """Add a statement to the queue's access policy (kept for SQS clients, not enforced)."""
        with self._rt.db.write() as conn:
            queue = self._fresh(conn)
            now = self._rt.now_ms()
            permissions.add(conn, queue, label, account_ids, actions, resource or queue.name, now)
            audit.record(conn, now, "AddPermission", self._name, detail={"label": label})
        self._rt.catalog.forget(self._name)

    @audit.audited("RemovePermission", _this_queue)
    def remove_permission(self, label: str) -> None:
        """Remove the access-policy statement named ``label``."""
        with self._rt.db.write() as conn:
            now = self._rt.now_ms()
            permissions.remove(conn, self._fresh(conn), label, now)
            audit.record(conn, now, "RemovePermission", self._name, detail={"label": label})
        self._rt.catalog.forget(self._name)

    @audit.audited("PurgeQueue", _this_queue)
    def purge(self) -> None:
        """Remove every message, in every state, and forget FIFO deduplication ids."""
        rt = self._rt
        with rt.db.write() as conn:
            now = rt.now_ms()
            purged = queue_rows.purge(conn, self._fresh(conn), now)
            audit.record(conn, now, "PurgeQueue", self._name, detail={"purged": purged})
        if purged:
            rt.counters.add(self._name, now, PURGED, purged)
        rt.payloads.settle()

    # -- tags -------------------------------------------------------------------

    @audit.audited("TagQueue", _this_queue)
    def tag(self, /, **tags: str) -> None:
        """Add or replace tags (key 1-128 characters, value 0-256, at most 50 per queue)."""
        with self._rt.db.write() as conn:
            queue_rows.set_tags(conn, self._fresh(conn), tags)
            audit.record(conn, self._rt.now_ms(), "TagQueue", self._name, detail={"keys": sorted(tags)})

    @audit.audited("UntagQueue", _this_queue)
    def untag(self, *keys: str) -> None:
        """Remove tags; keys that are not there are ignored."""
        with self._rt.db.write() as conn:
            queue_rows.remove_tags(conn, self._fresh(conn), keys)
            audit.record(
                conn, self._rt.now_ms(), "UntagQueue", self._name, detail={"keys": sorted(map(str, keys))}
            )

    def tags(self) -> dict[str, str]:
        """The queue's tags."""
        with self._rt.db.statement() as conn:
            return queue_rows.get_tags(conn, self._fresh(conn))

    # -- messages ---------------------------------------------------------------

    def send(
        self,
        body: str,
        *,
        delay_seconds: int | None = None,
        attributes: Mapping[str, AttributeInput] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        trace_header: str | None = None,
        offload: bool = True,
    ) -> SendResult:
        """Send one message; when this returns, the message is committed to the file.

        ``trace_header`` is SQS's AWSTraceHeader system attribute, kept and returned as is.
        On a queue with ``large_payloads``, a message over the queue's size limit goes to the payload
        store (up to 2 GiB); ``offload=False`` refuses it instead, as SQS does (the endpoint's rule).
        """
        item = send.check(
            body,
            delay_seconds=delay_seconds,
            attributes=attributes,
            group_id=group_id,
            deduplication_id=deduplication_id,
            trace_header=trace_header,
        )
        return self._send(self._offloaded(item) if offload else item)

    def send_file(
        self,
        source: str | os.PathLike[str] | BinaryIO,
        *,
        delay_seconds: int | None = None,
        attributes: Mapping[str, AttributeInput] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        trace_header: str | None = None,
    ) -> SendResult:
        """Send the contents of a file (a path, or a binary file object, read to its end) as one message.

        On a queue with ``large_payloads``, contents over the queue's size limit, or that are not message
        text (binary), are streamed to the payload store in chunks: memory stays flat whatever the size
        (up to 2 GiB); read them back with :meth:`Message.open_payload`.  Other contents are sent as their
        UTF-8 text, exactly as :meth:`send` would.  The keywords are those of :meth:`send`.
        """
        item = send.check(
            "-",  # the body comes from the file; every other part is checked as for send()
            delay_seconds=delay_seconds,
            attributes=attributes,
            group_id=group_id,
            deduplication_id=deduplication_id,
            trace_header=trace_header,
        )
        with self._rt.db.statement() as conn:
            queue = self._rt.catalog.get(conn, self._name)
        return self._send(offloading.from_file(item, source, queue, self._rt.payloads))

    def _offloaded(self, item: Outgoing) -> Outgoing:
        """``item``, its body in the payload store if the queue takes large payloads and it is too large."""
        if item.size <= limits.MIN_MAXIMUM_MESSAGE_SIZE:  # fits every queue
            return item
        with self._rt.db.statement() as conn:
            queue = self._rt.catalog.get(conn, self._name)
        return offloading.offload(item, queue, self._rt.payloads)

    def _offloaded_entry(self, item: Outgoing | DurableQError) -> Outgoing | DurableQError:
        """A batch entry, offloaded like :meth:`_offloaded`; what fails to store fails that entry alone."""
        if isinstance(item, DurableQError):
            return item
        try:
            return self._offloaded(item)
        except DurableQError as exc:
            return exc

    def _abandon(self, items: Sequence[Outgoing]) -> None:
        """Remove the payload files of messages that were not sent (see ``Payloads.abandon``)."""
        for item in items:
            if item.payload is not None:
                self._rt.payloads.abandon(item.payload.ref)

    def _send(self, item: Outgoing) -> SendResult:
        rt = self._rt
        try:
            if not self._fifo:
                with rt.db.change() as conn:
                    return send.send_one(
                        conn, rt.catalog, self._name, item, rt.now_ms(), rt.counters, rt.sealer, self._virtual
                    )
            with rt.db.write() as conn:
                (result,) = send.insert(conn, self._fresh(conn), [item], rt.now_ms(), rt.counters, rt.sealer)
        except BaseException:
            self._abandon([item])
            raise
        if isinstance(result, DurableQError):
            self._abandon([item])
            raise result
        return result

    def send_batch(self, entries: Sequence[SendEntry], *, offload: bool = True) -> BatchResult:
        """Send up to 10 messages in one transaction; each entry succeeds or fails on its own.  On a queue
        with ``large_payloads``, entries over its size limit go to the payload store (see :meth:`send`)."""
        if not isinstance(entries, Sequence) or not all(isinstance(e, SendEntry) for e in entries):
            raise InvalidParameterValue("send_batch takes a list of durableq.SendEntry")
        ids = validation.batch_ids([e.id for e in entries])
        checked: list[send.Outgoing | DurableQError] = []
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
            checked = [self._offloaded_entry(item) for item in checked]
        valid = [item for item in checked if isinstance(item, send.Outgoing)]
        total = sum(item.size for item in valid)
        if total > limits.MAX_BATCH_BYTES:
            self._abandon(valid)
            raise BatchRequestTooLong(
                template="the messages of the batch add up to {value} bytes; at most {high} are allowed",
                parameter="entries",
                value=total,
                high=limits.MAX_BATCH_BYTES,
                reason=Reason.TOO_LARGE,
            )
        rt = self._rt
        try:
            with rt.db.write() as conn:
                outcomes = send.insert(
                    conn, self._fresh(conn), valid, rt.now_ms(), rt.counters, rt.sealer, self._virtual
                )
        except BaseException:
            self._abandon(valid)
            raise
        self._abandon([item for item, outcome in zip(valid, outcomes) if isinstance(outcome, DurableQError)])
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

    def receive(
        self,
        max_messages: int = limits.DEFAULT_MAX_MESSAGES,
        *,
        visibility_timeout: int | None = None,
        wait_time: int | None = None,
        attempt_id: str | None = None,
    ) -> list[Message]:
        """Receive up to ``max_messages`` messages and hide them for the visibility timeout.

        With a wait time (this call's, else the queue's) the call waits until a
        message arrives or the time is up; an empty queue gives an empty list.
        While it waits the thread sleeps: one watcher per process and file
        wakes it when any process commits.
        """
        _check_receive(max_messages, visibility_timeout, wait_time, attempt_id)
        return self._rt.receiver.receive(
            self._name, max_messages, visibility_timeout, wait_time, attempt_id, self._virtual
        )

    async def receive_async(
        self,
        max_messages: int = limits.DEFAULT_MAX_MESSAGES,
        *,
        visibility_timeout: int | None = None,
        wait_time: int | None = None,
        attempt_id: str | None = None,
        executor: Executor | None = None,
    ) -> list[Message]:
        """:meth:`receive` for asyncio: the same rules, and a long poll that holds no thread while it waits.

        Each look at the database runs in ``executor`` (default: the loop's
        default executor); the waiting itself is an asyncio event.  Cancelling
        the call while it waits takes nothing from the queue.
        """
        _check_receive(max_messages, visibility_timeout, wait_time, attempt_id)
        return await self._rt.receiver.receive_async(
            self._name, max_messages, visibility_timeout, wait_time, attempt_id, executor, self._virtual
        )

    def delete(self, receipt_handle: str) -> None:
        """Delete the message a receipt handle names."""
        rt = self._rt
        with self._atomic() as conn:
            visibility.delete(conn, rt.catalog, self._name, receipt_handle, rt.now_ms(), rt.counters)
        rt.payloads.settle()

    def delete_batch(self, entries: Sequence[str | tuple[str, str]]) -> BatchResult:
        """Delete up to 10 messages: receipt handles, or ``(id, receipt_handle)`` pairs."""
        rows = batch.entries_with_ids(entries, 1, "a receipt handle or an (id, receipt handle) pair")
        ids = validation.batch_ids([row[0] for row in rows])
        rt = self._rt
        with rt.db.write() as conn:
            queue = self._fresh(conn)  # the queue must exist, even if every entry fails
            now = rt.now_ms()
            if queue.fifo:
                result = batch.each(
                    ids,
                    lambda i: visibility.delete(conn, rt.catalog, self._name, rows[i][1], now, rt.counters),
                )
            else:
                result = batch.outcomes(
                    ids, visibility.delete_many(conn, queue, [row[1] for row in rows], now, rt.counters)
                )
        rt.payloads.settle()
        return result

    def virtual_queue(self, name: str) -> VirtualQueue:
        """A virtual queue of this (standard) queue: its messages live in this queue but are received
        only through it.  Creating one writes nothing (no queue row, no schema change): it exists
        while it holds messages; see :class:`~durableq.VirtualQueue`."""
        validation.virtual_queue_name(name)
        validation.virtual_host(self._name, self._fifo)
        return VirtualQueue(self._rt, self._name, name)

    def respond(
        self, request: Message, body: str, *, attributes: Mapping[str, AttributeInput] | None = None
    ) -> SendResult | None:
        """Answer a request received from this queue (see :mod:`durableq.rpc`): send ``body`` to its
        reply queue with its correlation id and delete the request, in one transaction.  Returns
        None if the reply queue is gone (its requester left); the request is deleted anyway."""
        item = send.check(body, attributes=replies.reply_attributes(request, attributes))
        rt = self._rt
        with rt.db.write() as conn:
            self._fresh(conn)
            result = replies.respond(
                conn, rt.catalog, self._name, request, item, rt.now_ms(), rt.counters, rt.sealer
            )
        rt.payloads.settle()
        return result

    def change_visibility(self, receipt_handle: str, timeout: int) -> None:
        """Hide the message until ``timeout`` seconds from now (0 makes it visible at once)."""
        with self._atomic() as conn:
            visibility.change(conn, self._rt.catalog, self._name, receipt_handle, timeout, self._rt.now_ms())

    def extend_visibility(self, receipt_handle: str, timeout: int) -> int:
        """:meth:`change_visibility` for heartbeats: a timeout that would end more than 12 hours after
        the receive ends at that cap instead of being refused.  Returns the seconds the message is now
        hidden for (less than ``timeout`` once the cap is near, 0 when it is reached)."""
        rt = self._rt
        with self._atomic() as conn:
            return visibility.change(
                conn, rt.catalog, self._name, receipt_handle, timeout, rt.now_ms(), up_to_cap=True
            )

    def change_visibility_batch(
        self, entries: Sequence[tuple[str, int] | tuple[str, str, int]]
    ) -> BatchResult:
        """Change up to 10 visibility timeouts: ``(handle, timeout)`` or ``(id, handle, timeout)``."""
        rows = batch.entries_with_ids(entries, 2, "a (receipt handle, timeout) pair or (id, handle, timeout)")
        ids = validation.batch_ids([row[0] for row in rows])
        with self._rt.db.write() as conn:
            self._fresh(conn)
            now = self._rt.now_ms()
            catalog = self._rt.catalog
            return batch.each(
                ids, lambda i: visibility.change(conn, catalog, self._name, rows[i][1], rows[i][2], now)
            )


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


# Last: VirtualQueue is a Queue (its module imports this one), and virtual_queue returns one.
from .virtual import VirtualQueue  # noqa: E402
