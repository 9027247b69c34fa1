"""Helpers for tests of group commit: hold the gate, line writes up behind it, and see what each
returned or raised.

Each test first holds the gate with a write of its own that blocks until the test lets it go,
lines up the writes under test behind it (waiting until the gate counts them in line, not for
some time), then lets go: everything in line forms one batch, deterministically.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import durableq
from durableq.engines.sqlite.database import Database

from .conftest import until


def db_of(broker: durableq.Broker) -> Database:
    return broker._rt.db  # type: ignore[attr-defined,no-any-return]


@contextmanager
def gate_held(db: Database, *, transaction: bool = True) -> Iterator[None]:
    """Hold the gate with a write (a transaction, or an autocommit statement that holds no
    lock) until the block ends."""
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.write() if transaction else db.change():
            inside.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait()
    try:
        yield
    finally:
        release.set()
        holder.join()


class Calls:
    """Calls run in threads of their own, with what each returned or raised."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Any] = {}
        self.threads: dict[str, threading.Thread] = {}

    def start(self, name: str, call: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = call()
            except Exception as exc:  # noqa: BLE001 - the test looks at what each call raised
                self.outcomes[name] = exc

        thread = self.threads[name] = threading.Thread(target=run)
        thread.start()

    def join(self, timeout: float = 60) -> dict[str, Any]:
        for thread in self.threads.values():
            thread.join(timeout)
            assert not thread.is_alive(), "a grouped write never returned"
        return self.outcomes


def line_up(db: Database, calls: Calls, named: dict[str, Callable[[], Any]]) -> None:
    """Start ``named`` calls one at a time, each once the one before waits in line (so the
    batch runs them in this order)."""
    for count, (name, call) in enumerate(named.items(), start=1):
        calls.start(name, call)
        until(lambda count=count: db.waiting >= count, f"{count} writes wait in line")  # type: ignore[misc]


class Blocking:
    """A write that holds its batch open: it changes the queue's delay and waits inside its
    savepoint until :meth:`release` (``inside`` is set once it is there)."""

    def __init__(self, db: Database, queue: str, delay: int) -> None:
        self._db, self._queue, self._delay = db, queue, delay
        self.inside, self._release = threading.Event(), threading.Event()

    def __call__(self) -> None:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE durableq_queues SET delay_seconds = ? WHERE name = ?", (self._delay, self._queue)
            )
            self.inside.set()
            self._release.wait()

    def release(self) -> None:
        self._release.set()


def wait_child(pid: int) -> int:
    """A forked child's wait status; kill it and fail if it is stuck (say, waiting for a gate
    that no thread of its own will ever open)."""
    statuses: list[int] = []

    def exited() -> bool:
        done, status = os.waitpid(pid, os.WNOHANG)
        statuses.extend([status] if done == pid else [])
        return bool(statuses)

    try:
        until(exited, "the forked child exits")
    except AssertionError:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    return statuses[0]
