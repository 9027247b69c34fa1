"""One change watcher per process and database, shared by every broker of the process that opened it:
started by the first long poll, stopped when the last broker that held it closes.

The registry is keyed by the database (a file's device and inode, so one watcher however the file is
named; a server's URL); :class:`WatcherHold` is one open database's hold on its watcher."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path

from ..errors import BrokerClosed
from . import watch
from .change_sources import ChangeSource, Probe

_registry: dict[Hashable, tuple[watch.Watcher, int]] = {}
_registry_lock = threading.Lock()


def file_key(database: Path) -> tuple[int, int]:
    """The registry key of a database file (its device and inode: one watcher however it is named)."""
    info = os.stat(database)
    return (info.st_dev, info.st_ino)


def acquire(
    key: Hashable, name: str, open_source: Callable[[], ChangeSource], open_probe: Callable[[], Probe]
) -> tuple[Hashable, watch.Watcher]:
    """The watcher of the database ``key`` names (started on first use); give the key back to
    :func:`release`."""
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            # Looked up at each start (a test holds a start back by replacing it).
            watcher = watch.Watcher(open_source(), open_probe(), name)
            _registry[key] = (watcher, 1)
            return key, watcher
        _registry[key] = (entry[0], entry[1] + 1)
        return key, entry[0]


class WatcherHold:
    """One open database's hold on the watcher of its file or server: acquired by the first long poll
    (:meth:`get`), let go by :meth:`close`.  ``current`` is the watcher while held (the commit paths
    read it, cheaply, to pass their commits on)."""

    def __init__(
        self,
        key: Callable[[], Hashable],
        name: str,
        open_source: Callable[[], ChangeSource],
        open_probe: Callable[[], Probe],
    ) -> None:
        self._key = key
        self._name = name
        self._open_source = open_source
        self._open_probe = open_probe
        self._lock = threading.Lock()
        self._held: Hashable | None = None
        self._closed = False
        self.current: watch.Watcher | None = None

    def get(self) -> watch.Watcher:
        """The watcher (started on first use); BrokerClosed once closed."""
        with self._lock:
            if self.current is None:
                if self._closed:
                    raise BrokerClosed(f"{self._name}: the broker is closed")
                self._held, self.current = acquire(
                    self._key(), self._name, self._open_source, self._open_probe
                )
            return self.current

    def committed(self) -> None:
        """This process committed a change (nothing to do when no long poll ever asked)."""
        watcher = self.current
        if watcher is not None:
            watcher.committed()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            key, self._held, self.current = self._held, None, None
        if key is not None:
            release(key)

    def forget(self) -> None:
        """In a forked child: the watcher thread did not come along; start afresh when asked."""
        self._lock = threading.Lock()
        self._held = self.current = None


def release(key: Hashable) -> None:
    """One user fewer; the last one stops the watcher."""
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            return
        watcher, users = entry
        if users > 1:
            _registry[key] = (watcher, users - 1)
            return
        del _registry[key]
    watcher.close()


def _after_fork_in_child() -> None:
    # The watcher threads did not come along: forget them (their descriptors are the parent's).  The
    # lock too: a thread of the parent may have held it (starting a watcher, at a first long poll),
    # and in the child nobody would ever release it.
    global _registry_lock
    _registry_lock = threading.Lock()
    # Kept, never collected: collecting one would close its probe's connection, whose lock the
    # parent's watcher thread may have held at the fork (the child would wait for it forever).
    _inherited.extend(watcher for watcher, _ in _registry.values())
    _registry.clear()


#: A forked child's copies of its parent's watchers (see :func:`_after_fork_in_child`).
_inherited: list[watch.Watcher] = []


os.register_at_fork(after_in_child=_after_fork_in_child)
