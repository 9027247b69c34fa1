"""``QueueHandle``: what every handle on a queue's messages does, the base of ``Queue`` and
``VirtualQueue``.

A handle sends, receives, deletes and changes the visibility of the messages of one queue (or of one
virtual queue of it), and reads what a consumer needs beside them.  Each method is one call to the
operations (``ops/message_calls.py``, ``ops/queue_calls.py``), which own the transactions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from datetime import datetime
from typing import BinaryIO

from . import limits
from .engines.base import Database
from .ops import message_calls, queue_calls
from .ops.message_calls import QueueRef
from .ops.runtime import Runtime
from .ops.waiting_receive import WaitingReceive
from .options import OpenOptions
from .transaction import Transaction, runtime_for
from .types import (
    AttributeInput,
    BatchResult,
    Message,
    MinuteMetrics,
    PeekedMessage,
    RedrivePolicy,
    SendEntry,
    SendResult,
)


class QueueHandle:
    """The message calls of a queue or a virtual queue.  Cheap to create; safe to share between threads."""

    def __init__(self, runtime: Runtime, name: str, fifo: bool, virtual: str | None = None) -> None:
        self._rt = runtime
        self._name = name  # the queue's row: a virtual queue's host
        self._fifo = fifo
        self._virtual = virtual  # the virtual queue, None for the queue's own messages
        self._to = QueueRef(name, fifo, virtual)

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

    @property
    def _audit_target(self) -> tuple[Database, Callable[[], int]]:
        return self._rt.db, self._rt.now_ms

    # -- send -------------------------------------------------------------------

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
        transaction: Transaction | None = None,
    ) -> SendResult:
        """Send one message; when this returns, the message is committed to the database.

        ``trace_header`` is SQS's AWSTraceHeader system attribute, kept and returned as is.
        ``group_id`` is required on a FIFO queue; a standard queue keeps it as the message's tenant
        (SQS's fair queues) and returns it, without ordering by it.
        On a queue with ``large_payloads``, a message over the queue's size limit goes to the payload
        store (up to 2 GiB); ``offload=False`` refuses it instead, as SQS does (the endpoint's rule).
        With ``transaction`` (from :meth:`Broker.transaction`) the message is sent inside it: committed
        with it, and visible to no receiver until then.
        """
        return message_calls.send_message(
            runtime_for(self._rt, transaction),
            self._to,
            body,
            delay_seconds=delay_seconds,
            attributes=attributes,
            group_id=group_id,
            deduplication_id=deduplication_id,
            trace_header=trace_header,
            offload=offload,
        )

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
        return message_calls.send_file(
            self._rt,
            self._to,
            source,
            delay_seconds=delay_seconds,
            attributes=attributes,
            group_id=group_id,
            deduplication_id=deduplication_id,
            trace_header=trace_header,
        )

    def send_batch(
        self, entries: Sequence[SendEntry], *, offload: bool = True, transaction: Transaction | None = None
    ) -> BatchResult:
        """Send up to 10 messages in one transaction; each entry succeeds or fails on its own.  On a queue
        with ``large_payloads``, entries over its size limit go to the payload store (see :meth:`send`)."""
        return message_calls.send_batch(runtime_for(self._rt, transaction), self._to, entries, offload)

    # -- receive ----------------------------------------------------------------

    def receive(
        self,
        max_messages: int = limits.DEFAULT_MAX_MESSAGES,
        *,
        visibility_timeout: int | None = None,
        wait_time: int | None = None,
        attempt_id: str | None = None,
        transaction: Transaction | None = None,
    ) -> list[Message]:
        """Receive up to ``max_messages`` messages and hide them for the visibility timeout.

        With a wait time (this call's, else the queue's) the call waits until a
        message arrives or the time is up; an empty queue gives an empty list.
        While it waits the thread sleeps: one watcher per process and database
        wakes it when any process commits.  Inside a ``transaction`` it never waits (``wait_time``
        must be 0 or not given), and a rollback leaves the messages exactly as they were.
        """
        return message_calls.receive(
            runtime_for(self._rt, transaction),
            self._to,
            max_messages,
            visibility_timeout,
            wait_time,
            attempt_id,
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
        the call takes nothing from the queue: what a look running then claims goes
        back, visible at once, except a FIFO receive's with ``attempt_id`` (kept
        for a retry with the same id, as a lost answer's are).
        """
        return await message_calls.receive_async(
            self._rt, self._to, max_messages, visibility_timeout, wait_time, attempt_id, executor
        )

    def receive_or_wait(
        self,
        max_messages: int = limits.DEFAULT_MAX_MESSAGES,
        *,
        visibility_timeout: int | None = None,
        wait_time: int | None = None,
        attempt_id: str | None = None,
    ) -> list[Message] | WaitingReceive:
        """:meth:`receive_async`'s first look, made in this thread: the messages (or ``[]`` when none
        came and the receive is not to wait), or a :class:`WaitingReceive` whose ``result(executor)``
        is awaited for the rest.  For code already in a worker thread (the SQS endpoint's pool):
        most receives end with the first look, without a hand-off back to an executor."""
        return message_calls.receive_start(
            self._rt, self._to, max_messages, visibility_timeout, wait_time, attempt_id
        )

    def put_back(self, messages: list[Message], *, attempt_id: str | None = None) -> None:
        """Undo the receive that returned ``messages`` when their receiver never got them (a server
        whose client hung up before the answer was written): visible again at once, their receive
        not counted, as if never received.  ``attempt_id``: the receive's; a FIFO receive with one
        keeps its messages for the retry.  Not for messages a consumer has worked on: use
        :meth:`change_visibility` with 0."""
        message_calls.put_back(self._rt, self._to, messages, attempt_id)

    # -- delete, visibility, respond ----------------------------------------------

    def delete(self, receipt_handle: str, *, transaction: Transaction | None = None) -> None:
        """Delete the message a receipt handle names (inside ``transaction``: when it commits)."""
        message_calls.delete(runtime_for(self._rt, transaction), self._to, receipt_handle)

    def delete_batch(
        self, entries: Sequence[str | tuple[str, str]], *, transaction: Transaction | None = None
    ) -> BatchResult:
        """Delete up to 10 messages: receipt handles, or ``(id, receipt_handle)`` pairs."""
        return message_calls.delete_batch(runtime_for(self._rt, transaction), self._to, entries)

    def change_visibility(
        self, receipt_handle: str, timeout: int, *, transaction: Transaction | None = None
    ) -> None:
        """Hide the message until ``timeout`` seconds from now (0 makes it visible at once)."""
        message_calls.change_visibility(runtime_for(self._rt, transaction), self._to, receipt_handle, timeout)

    def extend_visibility(
        self, receipt_handle: str, timeout: int, *, transaction: Transaction | None = None
    ) -> int:
        """:meth:`change_visibility` for heartbeats: a timeout that would end more than 12 hours after
        the receive ends at that cap instead of being refused.  Returns the seconds the message is now
        hidden for (less than ``timeout`` once the cap is near, 0 when it is reached)."""
        return message_calls.change_visibility(
            runtime_for(self._rt, transaction), self._to, receipt_handle, timeout, up_to_cap=True
        )

    def change_visibility_batch(
        self,
        entries: Sequence[tuple[str, int] | tuple[str, str, int]],
        *,
        transaction: Transaction | None = None,
    ) -> BatchResult:
        """Change up to 10 visibility timeouts: ``(handle, timeout)`` or ``(id, handle, timeout)``."""
        return message_calls.change_visibility_batch(runtime_for(self._rt, transaction), self._to, entries)

    def respond(
        self, request: Message, body: str, *, attributes: Mapping[str, AttributeInput] | None = None
    ) -> SendResult | None:
        """Answer a request received from this queue (see :mod:`durableq.rpc`): send ``body`` to its
        reply queue with its correlation id and delete the request, in one transaction.  Returns
        None if the reply queue is gone (its requester left); the request is deleted anyway."""
        return message_calls.respond(self._rt, self._to, request, body, attributes)

    # -- what a consumer reads beside its messages (a virtual queue: its host's) ----

    def dead_letter_due(self, message: Message) -> RedrivePolicy | None:
        """The redrive policy that moves ``message`` (as received) to its dead-letter queue at its next
        receive, instead of returning it: it was received ``max_receive_count`` times and that queue
        exists.  None: its next receive returns it (as in SQS when the dead-letter queue is gone).
        The move itself happens inside that receive's transaction."""
        return queue_calls.dead_letter_due(self._rt, self._name, message)

    def peek(self, *, state: str | None = None, limit: int = limits.DEFAULT_PEEK) -> list[PeekedMessage]:
        """Look at messages (oldest first) without receiving them: nothing about them changes.

        ``state`` is ``"visible"``, ``"in_flight"``, ``"delayed"`` or None for all.
        """
        return queue_calls.peek_messages(self._rt, self._name, state, limit)

    def metrics(self, since: datetime | None = None) -> list[MinuteMetrics]:
        """Per-minute counters (sent, received, deleted, moved, expired, empty receives), oldest first."""
        return queue_calls.metrics(self._rt, self._name, since)

    def tags(self) -> dict[str, str]:
        """The queue's tags."""
        return queue_calls.tags(self._rt, self._name)
