"""Worker processes (``Worker(processes=True)``): the supervisor, and what runs in each process.

Each process is started with the ``spawn`` method (a fresh interpreter: no thread, lock or
connection of the parent comes along) and is sent, pickled, everything it needs: how the broker was
opened (:class:`~durableq.OpenOptions`: the database, durability, busy timeout, keyring, payload
store and clock, so no half of it is dropped), the queue, the handler and the worker's settings.
What cannot be pickled is refused when the worker is made (:func:`check_portable`), not in the
child.  Each process then runs a worker of its own, one handler at a time.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from typing import Any, Protocol

from . import limits
from .broker import reopen
from .errors import InvalidParameterValue
from .options import OpenOptions
from .queue import Queue
from .virtual import VirtualQueue

log = logging.getLogger(__name__)


class _Runs(Protocol):
    """A worker as a worker process uses it."""

    def run(self) -> None: ...

    def stop(self) -> None: ...


def check_portable(queue: Queue | VirtualQueue, **functions: object) -> None:
    """Refuse now what could not be pickled to a worker process: ``functions`` (named as the worker's
    arguments) and the clock of the queue's broker."""
    for what, thing in {**functions, "the broker's clock (open's clock=)": queue._options.clock}.items():
        try:
            pickle.dumps(thing)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise InvalidParameterValue(
                f"processes=True sends {what} to each worker process, pickled, and {thing!r} cannot be "
                f"({exc}): use a module-level function, or run handlers in threads (processes=False)"
            ) from None


def supervise(
    count: int,
    make: Callable[..., _Runs],
    queue: Queue | VirtualQueue,
    handler: Callable[..., Any],
    settings: dict[str, Any],
    initializer: Callable[[], object] | None,
    stop: threading.Event,
    on_stop: Callable[[int], None],
) -> None:
    """Run ``count`` worker processes, each ``make(queue, handler, concurrency=1, **settings)`` on
    its own broker, until they end or ``stop`` is set (then each is sent SIGTERM and stops cleanly;
    ``on_stop`` is told how many still ran)."""
    context = multiprocessing.get_context("spawn")
    args = (make, queue._options, queue._name, queue._virtual, handler, settings, initializer)
    children = [context.Process(target=_child, args=args, name=f"durableq-worker-{i}") for i in range(count)]
    for child in children:
        child.start()
    try:
        while any(c.is_alive() for c in children) and not stop.wait(limits.WORKER_STOP_CHECK):
            pass
        if stop.is_set():
            on_stop(sum(c.is_alive() for c in children))
    finally:
        for child in children:
            if child.is_alive() and child.pid is not None:
                child.terminate()  # SIGTERM: each child stops cleanly on its own
        for child in children:
            child.join()


def _child(
    make: Callable[..., _Runs],
    options: OpenOptions,
    queue: str,
    virtual: str | None,
    handler: Callable[..., Any],
    settings: dict[str, Any],
    initializer: Callable[[], object] | None,
) -> None:
    if initializer is not None:
        initializer()
    parent = os.getppid()
    with reopen(options) as broker:
        host = broker.get_queue(queue)
        target = host if virtual is None else host.virtual_queue(virtual)
        worker = make(target, handler, concurrency=1, **settings)
        done = threading.Event()
        threading.Thread(target=_stop_when_orphaned, args=(worker, parent, done), daemon=True).start()
        try:
            worker.run()
        finally:
            done.set()


def _stop_when_orphaned(worker: _Runs, parent: int, done: threading.Event) -> None:
    """A worker process whose supervisor died (even by SIGKILL) stops cleanly instead of running on."""
    while not done.wait(limits.WORKER_STOP_CHECK):
        if os.getppid() != parent:
            log.warning("the supervising process %d is gone: stopping", parent)
            worker.stop()
            return
