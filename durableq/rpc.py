"""Request-response over queues, as SQS's best practices describe it: each requester creates its
own reply queue at start-up (a temporary queue, never shared), sends requests that name it and carry
a correlation id, and maps replies back to their calls; a responder answers each request on its reply
queue, the reply and the delete of the request in one transaction.

    from durableq.rpc import Requester, Responder

    with Requester(broker, "resize") as requester:
        reply = requester.call("photo 7", timeout=10)   # a durableq.Message

    Responder(broker.get_queue("resize"), lambda request: f"resized {request.body}").run()
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from . import limits, validation
from .broker import Broker
from .errors import BrokerClosed, DurableQError, InvalidParameterValue, QueueDoesNotExist, RequestTimeout
from .ops.replies import CORRELATION_ID, REPLY_TO
from .queue import Queue
from .types import Attribute, AttributeInput, Message
from .worker import Worker

__all__ = ["CORRELATION_ID", "REPLY_TO", "Requester", "Responder"]

log = logging.getLogger(__name__)


class Requester:
    """Sends requests to ``request_queue`` and waits for their replies on a reply queue of its own
    (a temporary queue named ``reply_prefix-…``, deleted by :meth:`close`, or when idle for
    ``idle_timeout`` seconds after this process is gone).  Thread-safe: calls from many threads
    share one reply queue and one thread that receives the replies.  Replies that match no waiting
    call (late, after their call timed out, or unknown) are deleted and dropped.

    If the reply queue is deleted while the requester is open (this process was paused past its
    idle timeout and another process's broker reaped it, or someone deleted it), the requester
    makes a new one: the calls whose requests named the old one fail at once with
    ``QueueDoesNotExist`` (their replies, if any come, are lost: call again), later calls use the
    new one.  A requester with no call waiting checks, before its next call, that its reply queue
    still exists."""

    def __init__(
        self,
        broker: Broker,
        request_queue: str | Queue,
        *,
        reply_prefix: str = "reply",
        idle_timeout: int = limits.DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self._requests = broker.get_queue(request_queue) if isinstance(request_queue, str) else request_queue
        self._broker = broker
        self._reply_settings = (reply_prefix, idle_timeout)
        self._replies = broker.temporary_queue(reply_prefix, idle_timeout)
        # correlation id -> the call's future, its deadline (monotonic), what its timeout says, and
        # the reply queue its request names
        self._pending: dict[str, tuple[Future[Message], float, str, str]] = {}
        self._lock = threading.Condition()
        self._renewing = threading.Lock()  # one new reply queue at a time
        self._closed = False
        self._receiver: threading.Thread | None = None
        self.dropped = 0  #: replies that matched no waiting call

    @property
    def reply_queue(self) -> str:
        """The name of this requester's reply queue."""
        return self._replies.name

    def call(
        self,
        body: str,
        *,
        attributes: Mapping[str, AttributeInput] | None = None,
        timeout: float = limits.DEFAULT_CALL_TIMEOUT,
    ) -> Message:
        """Send a request and return its reply; ``RequestTimeout`` if none came within ``timeout`` s."""
        future = self.call_async(body, attributes=attributes, timeout=timeout)
        try:
            return future.result(timeout)
        except TimeoutError:
            self._expire(future)
            raise RequestTimeout(self._timeout_message(timeout)) from None

    def call_async(
        self,
        body: str,
        *,
        attributes: Mapping[str, AttributeInput] | None = None,
        timeout: float = limits.DEFAULT_CALL_TIMEOUT,
    ) -> Future[Message]:
        """Send a request; the future gets its reply, or ``RequestTimeout`` once ``timeout`` s passed
        without one (to within a second)."""
        validation.number("timeout", timeout, 0, limits.MAX_CALL_TIMEOUT, "seconds")
        if self._closed:
            raise BrokerClosed("the requester is closed")
        for reserved in (REPLY_TO, CORRELATION_ID):
            if attributes and reserved in attributes:
                raise InvalidParameterValue(f"attribute {reserved} is set by the requester; leave it out")
        correlation = uuid.uuid4().hex
        future: Future[Message] = Future()
        with self._lock:
            idle = not self._pending
        if idle:  # nothing received for a while: the reply queue may be gone (see the class)
            self._check_reply_queue()
        with self._lock:
            reply_to = self._replies.name
            deadline = time.monotonic() + timeout
            self._pending[correlation] = (future, deadline, self._timeout_message(timeout), reply_to)
            self._start_receiving()
            self._lock.notify_all()  # the receiving thread sleeps while no call waits
        marked = {
            **(attributes or {}),
            REPLY_TO: Attribute("String", reply_to),
            CORRELATION_ID: Attribute("String", correlation),
        }
        try:
            self._requests.send(body, attributes=marked)
        except BaseException:
            with self._lock:
                self._pending.pop(correlation, None)
            raise
        return future

    def close(self) -> None:
        """Delete the reply queue; calls still waiting fail with ``BrokerClosed``.  (A long poll of
        the receiving thread still under way ends on its own, within the nearest call's timeout.)"""
        with self._lock:
            self._closed = True
            waiting, self._pending = self._pending, {}
            self._lock.notify_all()
        for future, _, _, _ in waiting.values():
            if future.set_running_or_notify_cancel():
                future.set_exception(BrokerClosed("the requester was closed before the reply came"))
        with self._renewing:  # a new reply queue being made now is deleted here, not left behind
            self._replies.delete_queue()

    def __enter__(self) -> Requester:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the receiving thread --------------------------------------------------

    def _start_receiving(self) -> None:
        if self._receiver is None:
            self._receiver = threading.Thread(target=self._receive, name="durableq-replies", daemon=True)
            self._receiver.start()

    def _receive(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait()  # receive only while a call waits for its reply
                if self._closed:
                    return
            wait = self._expire_overdue()
            queue = self._replies
            try:
                replies = queue.receive(limits.MAX_MESSAGES_PER_RECEIVE, wait_time=wait)
                for reply in replies:  # first: the callers need not wait for the delete's commit
                    self._deliver(reply)
                if replies:  # a reply whose delete failed comes back later and is dropped then
                    queue.delete_batch([m.receipt_handle for m in replies])
            except BrokerClosed:
                return  # the broker was closed: nothing more can come
            except QueueDoesNotExist:
                if self._closed:
                    return  # close() deleted it
                try:
                    self._renew(queue.name)
                except DurableQError:
                    log.warning("could not make a new reply queue (will retry)", exc_info=True)
                    time.sleep(1)
            except DurableQError:
                log.warning("could not receive or delete replies (will retry)", exc_info=True)
                time.sleep(1)  # the file refuses (locked, full): back off rather than spin

    def _check_reply_queue(self) -> None:
        queue = self._replies
        try:
            queue.attributes()  # a fresh look (one read, as a long poll's first)
        except QueueDoesNotExist:
            self._renew(queue.name)

    def _renew(self, gone: str) -> None:
        """The reply queue ``gone`` was deleted: make a new one, and fail the calls that named it."""
        with self._renewing:
            if self._closed or self._replies.name != gone:
                return  # closed, or another thread made the new one already
            old, fresh = self._replies, self._broker.temporary_queue(*self._reply_settings)
            old.delete_queue()  # it is gone: this lets go of the broker's hold on it
            with self._lock:
                self._replies = fresh
                lost = [c for c, entry in self._pending.items() if entry[3] == gone]
                futures = [self._pending.pop(c)[0] for c in lost]
        log.warning(
            "reply queue %s was deleted (by another process, or idle for its idle timeout while this "
            "process was paused); %d waiting calls lost their replies; replies now go to %s",
            gone,
            len(futures),
            fresh.name,
        )
        for future in futures:
            if future.set_running_or_notify_cancel():
                future.set_exception(
                    QueueDoesNotExist(
                        f"the reply queue {gone!r} of this request was deleted before the reply came (by "
                        f"another process, or idle for {self._reply_settings[1]} s while this process was "
                        "paused); the request may have been handled, but its reply is lost: call again "
                        f"(replies now go to {fresh.name!r})"
                    )
                )

    def _deliver(self, reply: Message) -> None:
        attribute = reply.attributes.get(CORRELATION_ID)
        with self._lock:
            entry = self._pending.pop(str(attribute.value), None) if attribute is not None else None
        if entry is None or not entry[0].set_running_or_notify_cancel():
            self.dropped += 1
            log.debug("dropped reply %s: no call waits for it (late or unknown)", reply.message_id)
            return
        entry[0].set_result(reply)

    def _expire_overdue(self) -> int:
        """Fail the calls past their deadline; returns the seconds the next long poll may wait."""
        now = time.monotonic()
        with self._lock:
            overdue = [(c, f, said) for c, (f, deadline, said, _) in self._pending.items() if deadline <= now]
            for correlation, _, _ in overdue:
                del self._pending[correlation]
            deadlines = [deadline for _, deadline, _, _ in self._pending.values()]
        for _, future, said in overdue:
            if future.set_running_or_notify_cancel():
                future.set_exception(RequestTimeout(said))
        nearest = min(deadlines, default=now + limits.MAX_RECEIVE_WAIT_TIME) - now
        return max(1, min(limits.MAX_RECEIVE_WAIT_TIME, math.ceil(nearest)))

    def _expire(self, future: Future[Message]) -> None:
        with self._lock:
            for correlation, (pending, _, _, _) in list(self._pending.items()):
                if pending is future:
                    del self._pending[correlation]

    def _timeout_message(self, timeout: float) -> str:
        return (
            f"no reply within {timeout:g} s to a request on {self._requests.name!r} "
            f"(reply queue {self._replies.name!r}); a reply that comes later is dropped"
        )


class Responder:
    """Answers the requests of ``request_queue`` with ``handler(request)`` (a ``str``): the reply goes
    to the request's reply queue and the request is deleted, in one transaction.  It runs a
    :class:`~durableq.Worker` (``worker_options`` are its options), so a handler that raises leaves
    its request to be retried, as any job; ``Worker(queue, handler, respond=True)`` is the same."""

    def __init__(
        self, request_queue: Queue, handler: Callable[[Message], str], **worker_options: Any
    ) -> None:
        self.worker = Worker(request_queue, handler, respond=True, **worker_options)

    def run(self) -> None:
        """Answer requests until :meth:`stop`, SIGINT or SIGTERM (see :meth:`Worker.run`)."""
        self.worker.run()

    def stop(self) -> None:
        self.worker.stop()
