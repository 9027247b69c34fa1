"""An engine's connections, one per thread: opened on a thread's first use, closed when the thread
ends, never closed by a forked child that copied them."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar


class ThreadSlot:
    """Lives exactly as long as one thread's local data (the target of a finalizer)."""

    __slots__ = ("__weakref__",)


C = TypeVar("C")


#: A forked child's copies of its parent's connections: kept, never closed nor collected (collecting a
#: SQLite connection closes it).  Closing one could hang (a thread of the parent may have held its
#: lock at the fork: the child would wait for it forever) or end the parent's session.
_inherited: list[object] = []


def keep_inherited(copy: object) -> None:
    """Keep a forked child's copy of a parent's connection (or None) referenced for good."""
    if copy is not None:
        _inherited.append(copy)


class PerThread(Generic[C]):
    """An engine's connections, one per thread: each closed when its thread ends (thread-local values
    die with their thread; so must the connection, or a server starting a thread per request would
    leak one each time), all closed by :meth:`close_all`.

    Only the process that opened a connection ever closes it.  In a forked child CPython deletes
    every other thread's state, and so fires their finalizers, *before* any fork handler runs
    (:meth:`forget` comes too late): closing those copies would end the parent's PostgreSQL
    sessions (a Terminate message on the shared socket) and is what SQLite forbids across a fork.
    Nor may the child let them be collected (collecting a SQLite connection closes it): it keeps
    them in :data:`_inherited`.
    """

    def __init__(self, close: Callable[[C], None]) -> None:
        self._close = close
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[C] = []
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
        weakref.finalize(slot, self.release, conn)
        with self._lock:
            self._all.append(conn)
        return conn

    def release(self, conn: C) -> None:
        """Close ``conn`` (once, whoever asks first: its thread's end, or a replacement)."""
        if os.getpid() != self._pid:
            _inherited.append(conn)  # a forked child's copy (see the class): before the lock, which
            return  # may be held forever
        with self._lock:
            if conn not in self._all:
                return
            self._all.remove(conn)
        self._close(conn)

    def close_all(self) -> None:
        if os.getpid() != self._pid:
            self.forget()  # a forked child's copies of its parent's: nothing of its own to close
            return
        with self._lock:
            connections, self._all = self._all, []
        for conn in connections:
            self._close(conn)
        self._local = threading.local()

    def forget(self) -> None:
        """In a forked child: keep the parent's connections unclosed (:data:`_inherited`) and start
        afresh, the child's own connections to come.  The list goes first, so the finalizers that
        dropping the thread-local values fires find nothing left to close."""
        _inherited.extend(self._all)
        self._all = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._local = threading.local()
