"""Forks that copy no thread in the middle of SQLite, and children that never close what they copied.

A fork copies the parent's memory, locks included, but only the thread that forked.  Whatever
another thread held at that moment stays held in the child for ever:

- SQLite's mutexes (its memory allocator's, a connection's): the child's first SQLite call waits
  for them for ever;
- SQLite's table of the locks of the process, shared by all its connections to a file: copied in
  the middle of a write transaction, it holds the file's write lock in the child for good, and
  closing the copy instead would roll the parent's transaction back in the WAL index the two
  processes share.

So every use of SQLite by the engine, from a single statement to a whole write transaction, runs
inside :data:`INSIDE`, and a fork (``os.fork``, multiprocessing's ``fork`` method) first holds back
the threads about to enter and waits until no other thread is inside.  A forked child then closes
its copies of the parent's SQLite connections, idle as they are (it must: kept open, they would
share the lock table with the child's own connections, which would take no lock on the file), and
gets the locks of the library's own objects (:func:`renew_in_child`) anew.  A thread that forks
from inside (a transaction of its own under way) does not wait, since the threads it would wait
for may be waiting for it, and its child keeps every copy unclosed (``per_thread.keep_inherited``).
PostgreSQL's child never closes a copy (it would end the parent's session): they write to
``/dev/null``.  The same marks tell ``close()`` which connections another thread is using.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref

from .. import limits

log = logging.getLogger(__name__)

#: How deep each thread (by ident) is inside SQLite now; a thread outside has no entry.  Each thread
#: changes only its own entry, one dict operation at a time (atomic under the GIL).
_depth: dict[int, int] = {}


class _Fork:
    """Whether a fork is under way, and where the threads it holds back wait for its end."""

    def __init__(self) -> None:
        self.under_way = False
        self.over = threading.Condition(threading.Lock())

    def wait(self) -> None:
        with self.over:
            while self.under_way:
                self.over.wait()

    def end(self) -> None:
        with self.over:
            self.under_way = False
            self.over.notify_all()


_fork = _Fork()


class _Inside:
    """``with INSIDE:`` around every use of SQLite (nests; a class: it is on every statement's path).

    Entering marks the thread first and looks for a fork second, while :func:`_before_fork` marks the
    fork first and looks for threads second: under the GIL one of them sees the other, so no thread
    gets inside once a fork has seen none there."""

    __slots__ = ()

    def __enter__(self) -> None:
        me = threading.get_ident()
        depth = _depth.get(me, 0)
        if depth:
            _depth[me] = depth + 1  # already inside: never held back (the fork may wait for us)
            return
        while True:
            _depth[me] = 1
            if not _fork.under_way:
                return
            del _depth[me]  # a fork began: let it happen first
            _fork.wait()

    def __exit__(self, *exc: object) -> None:
        me = threading.get_ident()
        depth = _depth[me] - 1
        if depth:
            _depth[me] = depth
        else:
            del _depth[me]


INSIDE = _Inside()

#: Objects whose lock (the attribute named) a forked child makes anew: a thread of the parent may have
#: held it at the fork, and none would ever release it in the child.
_locks: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


def renew_in_child(owner: object, attribute: str = "_lock") -> None:
    """In a forked child, ``owner.<attribute>`` becomes a new ``threading.Lock``."""
    _locks[owner] = attribute


def inside(ident: int) -> bool:
    """Is thread ``ident`` inside a use of a database now (of either engine)?"""
    return ident in _depth


def others_inside() -> list[int]:
    """The threads other than this one inside SQLite now."""
    me = threading.get_ident()
    return [ident for ident in list(_depth) if ident != me]


#: In a forked child: whether the fork found no other thread inside, so that the copies of the
#: parent's SQLite connections are idle and the child may (and must) close them.
forked_between_calls = False


def _before_fork() -> None:
    global forked_between_calls
    with _fork.over:
        _fork.under_way = True
    forked_between_calls = not _depth.get(threading.get_ident())
    if not forked_between_calls:
        return  # forking from inside: see the module
    started = warned = time.monotonic()
    while others_inside():
        time.sleep(limits.FORK_QUIET_STEP)  # they finish (a write within its busy timeout)
        if time.monotonic() - warned >= limits.FORK_WAIT_WARNING:
            warned = time.monotonic()
            log.warning(
                "a fork has waited %.0f s for %d threads to finish with SQLite",
                warned - started,
                len(others_inside()),
            )


def _after_fork_in_parent() -> None:
    _fork.end()


def _after_fork_in_child() -> None:
    global _fork
    # The other threads did not come along: only this one can be inside (if it forked inside).
    for ident in others_inside():
        del _depth[ident]
    _fork = _Fork()  # the held-back threads and the lock they waited on stayed with the parent
    for owner, attribute in list(_locks.items()):
        setattr(owner, attribute, threading.Lock())


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)
