"""The bounded thread pool that runs library calls for the event loop.

The library keeps one SQLite connection per thread, so a fixed set of
threads bounds the open connections however many clients come and go.  Work
beyond ``max_pending`` calls waiting for a thread is refused at once
(:class:`PoolBusy`, answered 503) rather than queued without end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class PoolBusy(Exception):
    """Too many library calls are already waiting for a thread."""


class BoundedPool(Executor):
    """A thread pool whose queue of waiting calls is bounded; usable as an asyncio executor."""

    def __init__(self, threads: int, max_pending: int) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="durableq-pool")
        self._limit = threads + max_pending
        self._lock = threading.Lock()
        self._outstanding = 0

    @property
    def outstanding(self) -> int:
        """Calls running or waiting for a thread now."""
        return self._outstanding

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            if self._outstanding >= self._limit:
                raise PoolBusy(f"{self._outstanding} library calls are running or waiting")
            self._outstanding += 1
        try:
            future = self._executor.submit(fn, *args, **kwargs)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Any) -> None:
        with self._lock:
            self._outstanding -= 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._executor.shutdown(wait, cancel_futures=cancel_futures)
