"""Forks and SQLite: a process forks only between writes, and its child never closes what it copied.

SQLite keeps the locks of a process in tables of its own memory, shared by every connection of
the process to a file.  A child forked while a write transaction of its parent is open copies
those tables with the write lock taken, by a connection that no thread of the child will ever
finish: the child's own writes to the file would wait for it for ever.  Closing the copy instead
would roll back the parent's transaction in the child, rewriting the WAL index the parent shares
(and it would hang on the copy's mutex if a thread of the parent was inside SQLite at the fork).

So :data:`WRITES` counts the write transactions of this process under way: a fork waits until
none is (new ones wait for the fork), and the child keeps every copied connection unclosed for
its whole life (:func:`keep`; collecting one would close it).  Reads do not matter: a copy of a
read holds no lock that keeps a writer out.  PostgreSQL needs none of this (its child's copies
point at ``/dev/null``: see :mod:`.postgres`).
"""

from __future__ import annotations

import os
import threading
from typing import Any


class WritesInProgress:
    """The write transactions of this process under way, and a fork waiting for them to end.

    On every write's path: the common case is one uncontended lock and two counters."""

    def __init__(self) -> None:
        self._reset(0)

    def _reset(self, own: int) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._writing = own
        self._forking = False
        self._mine = threading.local()  # this thread's writes: a fork inside one can't wait for it
        self._mine.count = own

    def enter(self) -> None:
        """A write transaction begins (waits while a fork is under way)."""
        with self._lock:
            while self._forking:
                self._changed.wait()
            self._writing += 1
        mine = self._mine
        mine.count = getattr(mine, "count", 0) + 1

    def leave(self) -> None:
        """The write transaction ended (committed, rolled back or failed)."""
        self._mine.count -= 1
        with self._lock:
            self._writing -= 1
            if self._forking and not self._writing:
                self._changed.notify_all()

    def before_fork(self) -> None:
        """Hold new writes back and wait for those under way (but the forking thread's own)."""
        own = getattr(self._mine, "count", 0)
        with self._lock:
            self._forking = True
            while self._writing > own:
                self._changed.wait()

    def after_fork_in_parent(self) -> None:
        with self._lock:
            self._forking = False
            self._changed.notify_all()

    def after_fork_in_child(self) -> None:
        # The child has only the forking thread; waiters and their lock stayed with the parent.
        self._reset(getattr(self._mine, "count", 0))


#: The write transactions of this process on any SQLite file.
WRITES = WritesInProgress()

#: What a forked child copied from its parent and must never close (see the module).
_KEPT: list[Any] = []


def keep(copies: list[Any]) -> None:
    """Keep a forked child's copies of its parent's connections referenced, unclosed, for good."""
    _KEPT.extend(copies)


os.register_at_fork(
    before=WRITES.before_fork,
    after_in_parent=WRITES.after_fork_in_parent,
    after_in_child=WRITES.after_fork_in_child,
)
