"""Forks that copy no thread in the middle of a SQLite call.

A fork copies the parent's memory, locks included, but only the thread that forked: SQLite's mutexes
(its memory allocator's, a connection's) held by another thread at that moment stay held in the child
for ever, and the child's first SQLite call (opening a connection, say) waits for them for ever.  So
every SQLite call of the engine runs inside :data:`INSIDE`, and a fork (``os.fork``, multiprocessing's
``fork`` method) first waits, up to :data:`~durableq.limits.FORK_QUIET_WAIT` seconds, for a moment
when no other thread is inside.  It sees that moment holding the GIL, and keeps the GIL until the fork
itself, so no thread can enter meanwhile (a thread needs the GIL to enter).  Under a load that never
pauses that long it forks anyway, as before.

The same goes for the locks of the library's own objects: a child gets those registered with
:func:`renew_in_child` anew.
"""

from __future__ import annotations

import os
import threading
import time
import weakref

from .. import limits

#: How deep each thread (by ident) is inside SQLite calls now; a thread outside has no entry.  Each
#: thread changes only its own entry (one dict operation: atomic under the GIL).
_depth: dict[int, int] = {}


class _Inside:
    """``with INSIDE:`` around SQLite calls (nests; a class: it is on every statement's path)."""

    __slots__ = ()

    def __enter__(self) -> None:
        me = threading.get_ident()
        _depth[me] = _depth.get(me, 0) + 1

    def __exit__(self, *exc: object) -> None:
        me = threading.get_ident()
        left = _depth.get(me, 1) - 1
        if left:
            _depth[me] = left
        else:
            _depth.pop(me, None)


INSIDE = _Inside()

#: Objects whose lock (the attribute named) a forked child makes anew: a thread of the parent may have
#: held it at the fork, and none would ever release it in the child.
_locks: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


def renew_in_child(owner: object, attribute: str = "_lock") -> None:
    """In a forked child, ``owner.<attribute>`` becomes a new ``threading.Lock``."""
    _locks[owner] = attribute


def others_inside() -> bool:
    """Is a thread other than this one inside a SQLite call now?"""
    me = threading.get_ident()
    return any(ident != me for ident in list(_depth))


def _before_fork() -> None:
    deadline = time.monotonic() + limits.FORK_QUIET_WAIT
    while others_inside() and time.monotonic() < deadline:
        time.sleep(limits.FORK_QUIET_STEP)  # lets them finish (and keeps polling cheap)


def _after_fork_in_child() -> None:
    # The other threads did not come along: only this one can be inside (if it forked inside).
    me = threading.get_ident()
    for ident in [ident for ident in _depth if ident != me]:
        del _depth[ident]
    for owner, attribute in list(_locks.items()):
        setattr(owner, attribute, threading.Lock())


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
