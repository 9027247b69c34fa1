"""An engine's connections, one per thread: opened on a thread's first use, closed when the thread
ends (by that thread when another closes the database while it is inside a call), and never closed
by a forked child unless the engine says it may."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar


class ThreadSlot:
    """Lives exactly as long as one thread's local data (the target of a finalizer)."""

    __slots__ = ("__weakref__",)


C = TypeVar("C")


#: A forked child's copies of its parent's connections that it may not close: kept, never closed nor
#: collected (collecting a SQLite connection closes it).  Closing one could hang (a thread of the
#: parent may have held its lock at the fork: the child would wait for it forever) or end the
#: parent's session.
_inherited: list[object] = []


def keep_inherited(copies: list[Any]) -> None:
    """Keep a forked child's copies of its parent's connections referenced for good."""
    _inherited.extend(copy for copy in copies if copy is not None)


class PerThread(Generic[C]):
    """An engine's connections, one per thread: each closed when its thread ends (thread-local values
    die with their thread; so must the connection, or a server starting a thread per request would
    leak one each time), all closed by :meth:`close_all`.

    A connection is closed by its own thread when another thread is using it: closing a connection
    under a statement of another thread crashes the process.  :meth:`close_all` closes the others at
    once and leaves a busy one to its thread, which closes it at its next call (see
    :meth:`close_mine`) or when it ends.

    Only the process that opened a connection closes it this way.  In a forked child CPython deletes
    every other thread's state, and so fires their finalizers, *before* any fork handler runs: those
    copies are set aside, and :meth:`forget` hands them all to the engine, which knows whether it
    may close them (see :mod:`.forks`).
    """

    def __init__(self, close: Callable[[C], None]) -> None:
        self._close = close
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[tuple[C, int]] = []  # each connection with the thread it belongs to
        self._busy: list[C] = []  # closed by a close_all while their thread used them: theirs to close
        self._copies: list[C] = []  # in a forked child: the parent's, set aside by their finalizers
        self._pid = os.getpid()  # the process whose connections these are

    def __len__(self) -> int:
        return len(self._all)

    def current(self) -> C | None:
        """This thread's connection, if it has one."""
        conn: C | None = getattr(self._local, "conn", None)
        return conn

    def adopt(self, conn: C) -> C:
        """Make ``conn`` this thread's connection."""
        self._local.conn = conn
        self._local.slot = slot = ThreadSlot()
        # Not at exit: a daemon thread may be inside a statement on it then.
        weakref.finalize(slot, self.release, conn).atexit = False
        with self._lock:
            self._all.append((conn, threading.get_ident()))
        return conn

    def release(self, conn: C) -> None:
        """Close ``conn`` (once, whoever asks first: its thread's end, or a replacement)."""
        if os.getpid() != self._pid:
            self._copies.append(conn)  # a forked child's copy (see the class): before the lock, which
            return  # may be held forever
        with self._lock:
            pair = next((pair for pair in self._all if pair[0] is conn), None)
            if pair is not None:
                self._all.remove(pair)
            elif conn in self._busy:
                self._busy.remove(conn)
            else:
                return
        self._close(conn)

    def close_mine(self) -> None:
        """Close this thread's connection if a :meth:`close_all` left it to this thread."""
        conn = self.current()
        if conn is not None:
            del self._local.conn  # (its slot's finalizer, at the thread's end, then finds nothing)
            self.release(conn)

    def close_all(self, busy: Callable[[int], bool]) -> None:
        """Close every connection but those whose thread is inside a call now (``busy(ident)``): their
        threads close them (the database must refuse new calls first, so none starts meanwhile)."""
        me = threading.get_ident()
        with self._lock:
            pairs, self._all = self._all, []
            in_use = [conn for conn, owner in pairs if owner != me and busy(owner)]
            self._busy.extend(in_use)
        for conn, _ in pairs:
            if not any(conn is used for used in in_use):
                self._close(conn)

    def forget(self) -> list[C]:
        """In a forked child: let go of the parent's connections unclosed and start afresh, the
        child's own connections to come; returns the copies for the engine to keep or close."""
        copies = [conn for conn, _ in self._all] + self._busy + self._copies
        self._all, self._busy, self._copies = [], [], []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._local = threading.local()
        return copies
