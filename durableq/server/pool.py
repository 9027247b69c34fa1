"""The bounded thread pool that runs library calls for the event loop.

The library keeps one SQLite connection per thread, so a fixed set of
threads bounds the open connections however many clients come and go.  Work
beyond ``max_pending`` calls waiting for a thread is refused at once
(:class:`PoolBusy`, answered 503) rather than queued without end.

Its own threads rather than a ``ThreadPoolExecutor``: a request's call is
the one hand-off between the loop and a thread, and :meth:`BoundedPool.run`
makes it as cheap as a hand-off gets (a C ``SimpleQueue`` to the thread and
one ``call_soon_threadsafe`` back, no ``concurrent.futures.Future`` with its
locks and chained callbacks between them): with one client it was about a
fifth of a request's time on the server.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

#: What a thread runs: the call, its arguments, and what to do with its outcome (value, error).
_Work = tuple[Callable[..., Any], tuple[Any, ...], Callable[[Any, BaseException | None], None]]


class PoolBusy(Exception):
    """Too many library calls are already waiting for a thread."""


class BoundedPool(Executor):
    """A thread pool whose queue of waiting calls is bounded; usable as an asyncio executor."""

    def __init__(self, threads: int, max_pending: int) -> None:
        self._limit = threads + max_pending
        self._lock = threading.Lock()
        self._outstanding = 0
        self._stopped = False
        # Idle threads wait on inboxes of their own, the last one idle on top: a light load keeps
        # to one thread, whose SQLite connection and page cache are warm (a shared queue hands
        # calls round the threads, each finding its cache out of date).
        self._idle: list[queue.SimpleQueue[_Work | None]] = []
        self._backlog: collections.deque[_Work] = collections.deque()
        self._threads = []
        for i in range(threads):
            inbox: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
            self._idle.append(inbox)
            thread = threading.Thread(
                target=self._serve, args=(inbox,), name=f"durableq-pool_{i}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    @property
    def outstanding(self) -> int:
        """Calls running or waiting for a thread now."""
        return self._outstanding

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a pool thread, awaited (PoolBusy at once when the pool is full)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def done(value: Any, exc: BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(_settle, future, value, exc)
            except RuntimeError:  # the loop is closed: nobody awaits the call any more
                pass

        def call() -> T:
            if future.cancelled():  # its request was cancelled while it waited for a thread
                raise asyncio.CancelledError
            return fn(*args)

        self._put((call, (), done))
        return await future

    def call(
        self, fn: Callable[..., T], args: tuple[Any, ...], then: Callable[[Any, BaseException | None], None]
    ) -> None:
        """``fn(*args)`` in a pool thread, then ``then(value, error)`` on the running event loop
        (PoolBusy at once when the pool is full): :meth:`run` without its future and the task that
        awaits it, for a request served from its connection's callbacks (``http.py``)."""
        loop = asyncio.get_running_loop()

        def done(value: Any, exc: BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(then, value, exc)
            except RuntimeError:  # the loop is closed: nobody waits for the answer any more
                pass

        self._put((fn, args, done))

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """The ``Executor`` form (``run_in_executor``, a long poll's looks)."""
        future: Future[T] = Future()

        def done(value: Any, exc: BaseException | None) -> None:
            if future.cancelled():
                return  # cancelled before a thread took it: it did not run
            if exc is None:
                future.set_result(value)
            else:
                future.set_exception(exc)

        def call() -> T | None:
            if not future.set_running_or_notify_cancel():
                return None
            return fn(*args, **kwargs)

        self._put((call, (), done))
        return future

    def _put(self, work: _Work) -> None:
        with self._lock:
            if self._stopped:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if self._outstanding >= self._limit:
                raise PoolBusy(f"{self._outstanding} library calls are running or waiting")
            self._outstanding += 1
            if not self._idle:
                self._backlog.append(work)  # the next thread to finish takes it
                return
            inbox = self._idle.pop()
        inbox.put(work)

    def _serve(self, inbox: queue.SimpleQueue[_Work | None]) -> None:
        work = inbox.get()
        while work is not None:
            fn, args, done = work
            try:
                value, exc = fn(*args), None
            except BaseException as error:  # noqa: BLE001 - handed to whoever awaits the call
                value, exc = None, error
            with self._lock:
                self._outstanding -= 1
                following = self._backlog.popleft() if self._backlog else None
                idle = following is None and not self._stopped
                if idle:
                    self._idle.append(inbox)
            done(value, exc)
            del fn, args, done, value, exc  # hold nothing while idle
            work = inbox.get() if idle else following

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls; the threads end once the calls taken before are done (``wait``: join them)."""
        with self._lock:
            self._stopped = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return  # the awaiting request was cancelled; its call ran to the end all the same
    if exc is None:
        future.set_result(value)
    else:
        future.set_exception(exc)
