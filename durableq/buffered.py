"""``BufferedQueue``: client-side batching and prefetching over a :class:`~durableq.Queue`.

The analogue of AWS's buffered asynchronous SQS client: sends, deletes and
visibility changes return futures and go out as batches of up to
``max_batch`` (a full batch at once, a partial one after ``max_wait``);
receives are served from up to ``prefetch`` messages fetched ahead.  Unlike
AWS's client it works on FIFO queues too: a queue's sends leave in the order
they were made, batch after batch, so each group keeps its order.

A future resolves only after the batch holding its call is committed, so a
resolved send is exactly as durable as ``Queue.send``.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from . import errors, limits, validation
from .errors import BatchRequestTooLong, DurableQError, UnsupportedOperation
from .queue import Queue
from .types import AttributeInput, BatchResult, BatchSuccess, Message, SendEntry, SendResult

#: A buffered send's arguments: body, delay, attributes, group, deduplication id, trace header.
_SendCall = tuple[str, int | None, Mapping[str, AttributeInput] | None, str | None, str | None, str | None]
T = TypeVar("T")  # what one buffered call's future holds
C = TypeVar("C")  # one buffered call, as its batch takes it


class BufferedQueue:
    """Batches the calls of any number of threads to one queue; use it as a context manager
    (or call :meth:`close`) so that nothing buffered is left behind."""

    def __init__(
        self,
        queue: Queue,
        *,
        max_batch: int = limits.MAX_BATCH_ENTRIES,
        max_wait: float = limits.DEFAULT_BUFFER_WAIT,
        prefetch: int = limits.MAX_MESSAGES_PER_RECEIVE,
        visibility_timeout: int | None = None,
    ) -> None:
        """``max_batch`` calls at most per batch (1-10); ``max_wait`` seconds a partial batch
        waits for more (0-60); ``prefetch`` messages received ahead at most (0-10), hidden for
        ``visibility_timeout`` seconds (default: the queue's)."""
        if not isinstance(queue, Queue):
            raise errors.InvalidParameterValue(
                f"BufferedQueue wraps a durableq.Queue; got {type(queue).__name__}"
            )
        validation.integer("max_batch", max_batch, 1, limits.MAX_BATCH_ENTRIES, "calls")
        validation.number("max_wait", max_wait, 0, limits.MAX_BUFFER_WAIT)
        validation.integer("prefetch", prefetch, 0, limits.MAX_MESSAGES_PER_RECEIVE, "messages")
        if visibility_timeout is not None:
            validation.integer("visibility_timeout", visibility_timeout, 0, limits.MAX_VISIBILITY_TIMEOUT)
        self.queue = queue
        self._timeout = visibility_timeout
        self._prefetch = prefetch
        self._closed = False
        self._wake = threading.Condition()
        self._timer_idle = False  # the timer waits with no deadline (guarded by _wake)
        self._sends = _Outbox[_SendCall, SendResult](max_batch, max_wait, self._send_batch, self._started)
        self._deletes = _Outbox[str, None](max_batch, max_wait, self._delete_batch, self._started)
        self._changes = _Outbox[tuple[str, int], None](max_batch, max_wait, self._change_batch, self._started)
        self._outboxes: tuple[_Outbox[Any, Any], ...] = (self._sends, self._deletes, self._changes)
        self._inbox: deque[tuple[Message, int]] = deque()  # (message, broker time it stops being ours)
        self._inbox_lock = threading.Lock()
        self._timer = threading.Thread(target=self._flush_when_due, name="durableq-buffer", daemon=True)
        self._timer.start()
        _open_buffers.add(self)

    def _forked(self) -> None:
        """In a forked child: what is buffered and prefetched is the parent's (its calls, its messages
        in flight), and the parent's locks and timer thread did not come along.  Start empty."""
        self._wake = threading.Condition()
        self._timer_idle = False
        for outbox in self._outboxes:
            outbox.forked()
        self._inbox = deque()
        self._inbox_lock = threading.Lock()
        if not self._closed:
            self._timer = threading.Thread(target=self._flush_when_due, name="durableq-buffer", daemon=True)
            self._timer.start()

    def __enter__(self) -> BufferedQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<durableq.BufferedQueue of {self.queue!r}>"

    # -- outgoing calls ------------------------------------------------------------

    def send(
        self,
        body: str,
        *,
        delay_seconds: int | None = None,
        attributes: Mapping[str, AttributeInput] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        trace_header: str | None = None,
    ) -> Future[SendResult]:
        """Buffer a send (the arguments of ``Queue.send``); the future holds its SendResult,
        or the error that send alone would have raised."""
        # Kept as arguments: the SendEntry is made once, numbered, when its batch leaves.
        call = (body, delay_seconds, attributes, group_id, deduplication_id, trace_header)
        return self._add(self._sends, call)

    def delete(self, receipt_handle: str) -> Future[None]:
        """Buffer a delete."""
        return self._add(self._deletes, receipt_handle)

    def change_visibility(self, receipt_handle: str, timeout: int) -> Future[None]:
        """Buffer a visibility change."""
        return self._add(self._changes, (receipt_handle, timeout))

    def _add(self, outbox: _Outbox[C, T], call: C) -> Future[T]:
        self._open()
        future = outbox.add(call)
        if self._closed:
            outbox.flush()  # close() may have flushed before this call came in: it must not be left
        return future

    def flush(self) -> None:
        """Send every buffered call now and wait until each batch is committed."""
        for outbox in self._outboxes:
            outbox.flush()

    # -- receiving -------------------------------------------------------------------

    def receive(self, max_messages: int = 1, *, wait_time: int | None = None) -> list[Message]:
        """Up to ``max_messages`` messages: prefetched ones first, else one receive that also
        fetches up to ``prefetch`` more.  A prefetched message is handed out only while at least
        half of its visibility timeout is left (the rest of the time is the caller's to work);
        others are dropped here and come back in the queue when their timeout ends."""
        self._open()
        validation.integer("max_messages", max_messages, 1, limits.MAX_MESSAGES_PER_RECEIVE, "messages")
        taken = self._take(max_messages)
        if taken:
            return taken
        timeout = self._visibility_timeout()
        fetch = min(max_messages + self._prefetch, limits.MAX_MESSAGES_PER_RECEIVE)
        received = self.queue.receive(fetch, visibility_timeout=timeout, wait_time=wait_time)
        keep_until = self._now_ms() + timeout * 500
        with self._inbox_lock:
            self._inbox.extend((message, keep_until) for message in received[max_messages:])
        return received[:max_messages]

    def _take(self, count: int) -> list[Message]:
        now = self._now_ms()
        taken: list[Message] = []
        with self._inbox_lock:
            while self._inbox and len(taken) < count:
                message, keep_until = self._inbox.popleft()
                if now < keep_until:
                    taken.append(message)
        return taken

    def _visibility_timeout(self) -> int:
        if self._timeout is None:
            self._timeout = int(self.queue.attributes()["visibility_timeout"])
        return self._timeout

    def _now_ms(self) -> int:
        return self.queue._rt.now_ms()  # the broker's clock, which set the visibility deadlines

    # -- closing -----------------------------------------------------------------------

    def close(self) -> None:
        """Send what is buffered, release what was prefetched and not handed out (visibility 0),
        and stop.  Raises the first error of the release, if any; calls after it fail."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        self._timer.join()
        self.flush()
        with self._inbox_lock:
            unused, self._inbox = [message for message, _ in self._inbox], deque()
        for start in range(0, len(unused), limits.MAX_BATCH_ENTRIES):
            chunk = unused[start : start + limits.MAX_BATCH_ENTRIES]
            # A handle whose message is visible again or gone fails alone, harmlessly.
            self.queue.change_visibility_batch([(m.receipt_handle, 0) for m in chunk])

    def _open(self) -> None:
        if self._closed:
            raise UnsupportedOperation(f"this BufferedQueue of {self.queue.name!r} is closed")

    def _flush_when_due(self) -> None:
        with self._wake:
            while not self._closed:
                due = [outbox.due() for outbox in self._outboxes]
                pending = [at for at in due if at is not None]
                now = time.monotonic()
                if any(at <= now for at in pending):
                    self._wake.release()  # flush outside the lock: callers keep adding meanwhile
                    try:
                        for outbox, at in zip(self._outboxes, due):
                            if at is not None and at <= now:
                                outbox.flush()
                    finally:
                        self._wake.acquire()
                    continue
                self._timer_idle = not pending
                self._wake.wait(min(pending) - now if pending else None)
                self._timer_idle = False

    def _started(self) -> None:
        """An outbox got its first call: wake the timer if it waits for nothing.  A timer that
        waits for a deadline needs no word: every new deadline is later than the ones it knows
        (the same ``max_wait`` for all), and it looks again when it wakes."""
        with self._wake:
            if self._timer_idle:
                self._wake.notify()

    # -- the batches ---------------------------------------------------------------------

    def _send_batch(self, calls: list[_SendCall]) -> list[SendResult | DurableQError]:
        entries = [_entry(i, call) for i, call in enumerate(calls)]
        try:
            result = self.queue.send_batch(entries)
        except BatchRequestTooLong:  # together over the size limit: each on its own, in order
            return [self._send_alone(_entry(0, call)) for call in calls]
        return _by_id(result, len(entries), _sent)

    def _send_alone(self, entry: SendEntry) -> SendResult | DurableQError:
        try:
            return _by_id(self.queue.send_batch([entry]), 1, _sent)[0]
        except DurableQError as exc:
            return exc

    def _delete_batch(self, handles: list[str]) -> list[DurableQError | None]:
        result = self.queue.delete_batch([(str(i), handle) for i, handle in enumerate(handles)])
        return _by_id(result, len(handles), lambda _: None)

    def _change_batch(self, changes: list[tuple[str, int]]) -> list[DurableQError | None]:
        result = self.queue.change_visibility_batch(
            [(str(i), handle, timeout) for i, (handle, timeout) in enumerate(changes)]
        )
        return _by_id(result, len(changes), lambda _: None)


class _Outbox(Generic[C, T]):
    """Buffered calls of one kind, sent as batches in the order they were made."""

    def __init__(
        self,
        max_batch: int,
        max_wait: float,
        send: Callable[[list[C]], Sequence[T | DurableQError]],
        started: Callable[[], None],
    ) -> None:
        self._max_batch = max_batch
        self._max_wait = max_wait
        self._send = send
        self._started = started
        self._items: list[tuple[C, Future[T]]] = []
        self._since: float | None = None  # when the oldest buffered call was made
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # one batch at a time: the next leaves after this one

    def add(self, item: C) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            self._items.append((item, future))
            full = len(self._items) >= self._max_batch
            first = len(self._items) == 1
            if first:
                self._since = time.monotonic()
        if full:
            self.flush()  # in the caller's thread: no hand-off, and a caller faster than the file waits
        elif first:
            self._started()
        return future

    def forked(self) -> None:
        """In a forked child: the buffered calls are the parent's to send; the locks are new."""
        self._items = []
        self._since = None
        self._lock = threading.Lock()
        self._sending = threading.Lock()

    def due(self) -> float | None:
        """When the buffered calls must leave (monotonic seconds), if there are any."""
        since = self._since
        return None if since is None else since + self._max_wait

    def flush(self) -> None:
        """Send everything buffered now, in batches, and resolve their futures."""
        with self._sending:
            while True:
                with self._lock:
                    batch, self._items = self._items[: self._max_batch], self._items[self._max_batch :]
                    self._since = time.monotonic() if self._items else None
                if not batch:
                    return
                _resolve(batch, self._send)


def _resolve(
    batch: list[tuple[C, Future[T]]], send: Callable[[list[C]], Sequence[T | DurableQError]]
) -> None:
    try:
        outcomes: Sequence[T | DurableQError] = send([item for item, _ in batch])
    except BaseException as exc:  # noqa: BLE001 - the whole batch failed: every caller learns why
        for _, future in batch:
            future.set_exception(exc)
        return
    for (_, future), outcome in zip(batch, outcomes):
        if isinstance(outcome, DurableQError):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _entry(number: int, call: _SendCall) -> SendEntry:
    body, delay_seconds, attributes, group_id, deduplication_id, trace_header = call
    return SendEntry(
        str(number),
        body,
        delay_seconds=delay_seconds,
        attributes=attributes,
        group_id=group_id,
        deduplication_id=deduplication_id,
        trace_header=trace_header,
    )


def _sent(success: BatchSuccess) -> SendResult:
    return SendResult(success.message_id or "", success.sequence_number, success.md5_of_body or "")


def _by_id(result: BatchResult, count: int, success: Callable[[BatchSuccess], T]) -> list[T | DurableQError]:
    """A batch's outcomes in entry order (entries are numbered 0, 1, ...)."""
    outcomes: list[T | DurableQError] = [DurableQError("no outcome")] * count
    for ok in result.successful:
        outcomes[int(ok.id)] = success(ok)
    for failed in result.failed:
        outcomes[int(failed.id)] = _error(failed.code, failed.message)
    return outcomes


def _error(code: str, message: str) -> DurableQError:
    """The error a failed entry's code names (the errors of durableq.errors are named by code)."""
    kind = getattr(errors, code, None)
    if isinstance(kind, type) and issubclass(kind, DurableQError):
        return kind(message)
    return DurableQError(message)


#: Every BufferedQueue of this process, for the fork handler below.
_open_buffers: weakref.WeakSet[BufferedQueue] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for buffer in list(_open_buffers):
        buffer._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
