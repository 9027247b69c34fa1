"""Where a change watcher learns that a commit may have happened (its *change sources*), and the
engine's *probe* that confirms it.

- the operating system: on Linux, inotify on the WAL file (every commit of any process appends frames
  to it), via ``inotify_simple``;
- elsewhere (or when inotify is unavailable), a poll of the WAL file's ``stat`` stamp every few
  milliseconds, only while someone listens;
- on PostgreSQL, ``LISTEN``/``NOTIFY`` (:mod:`.postgres.notify`): a socket that becomes readable at
  each commit of any host.

An OS event says only that the WAL was written; the probe (SQLite's ``PRAGMA data_version``, or
PostgreSQL's next transaction id) is the authority on whether anything committed (see :mod:`.watch`).
"""

from __future__ import annotations

import enum
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any, Protocol

from .. import limits

log = logging.getLogger(__name__)

# Imported with durableq, not by the first long poll: a child forked while another thread imported
# it would inherit the module's import lock held, and hang at its own first long poll.
inotify: Any = None
_no_inotify = "not on Linux"
if sys.platform.startswith("linux"):
    try:
        inotify = importlib.import_module("inotify_simple")
    except (ImportError, OSError) as exc:  # no package, or no inotify in this libc
        _no_inotify = str(exc)


class News(enum.Enum):
    """What a change source read: nothing, a write that may be a commit, or a commit for sure."""

    NOTHING = 0
    MAYBE = 1
    COMMITTED = 2


class ChangeSource(Protocol):
    """Where a watcher learns that another process may have committed."""

    #: A descriptor that becomes readable when there is news, or None for a source that is polled.
    fileno: int | None
    #: How often a polled source is read while someone listens (seconds).
    interval: float

    def read(self) -> News:
        """Consume what the source has to say (never blocks)."""
        ...

    def close(self) -> None: ...


class Probe(Protocol):
    """The engine's authority on whether anything committed: a number that changes with every commit."""

    def __call__(self) -> int: ...

    def close(self) -> None: ...


class InotifySource:
    """inotify on the WAL file, and on its folder for when the WAL is created or replaced (Linux)."""

    def __init__(self, wal: Path) -> None:
        if inotify is None:
            raise ImportError(_no_inotify)  # os_source falls back on the stat poll
        self._flags = inotify.flags
        self._wal = wal
        self._inotify = inotify.INotify()
        self.fileno: int | None = self._inotify.fileno()
        self.interval = limits.WATCH_CONFIRM_INTERVAL
        # The folder watch sees only creations and renames (rare), not every write next to the file.
        self._inotify.add_watch(wal.parent, self._flags.CREATE | self._flags.MOVED_TO)
        self._file: int | None = None
        self._arm()

    def _arm(self) -> None:
        try:
            self._file = self._inotify.add_watch(self._wal, self._flags.MODIFY)
        except OSError:
            self._file = None  # no WAL yet: the folder watch tells when it appears

    def read(self) -> News:
        news = News.NOTHING
        for event in self._inotify.read(timeout=0):
            if event.wd == self._file and event.mask & self._flags.MODIFY:
                news = News.MAYBE
            elif event.wd == self._file and event.mask & self._flags.IGNORED:
                self._file = None  # the WAL was deleted: wait for the next one
            elif event.name == self._wal.name:
                self._arm()  # a new WAL file: watch it, and its first frames may be a commit
                news = News.MAYBE
        return news

    def close(self) -> None:
        self._inotify.close()


class StatSource:
    """The fallback: the WAL file's modification time and size, read every few milliseconds."""

    fileno: int | None = None

    def __init__(self, wal: Path) -> None:
        self._wal = wal
        self.interval = limits.LONG_POLL_INTERVAL
        self._stamp = _wal_stamp(wal)

    def read(self) -> News:
        stamp = _wal_stamp(self._wal)
        moved, self._stamp = stamp != self._stamp, stamp
        return News.MAYBE if moved else News.NOTHING

    def close(self) -> None:
        pass


def _wal_stamp(wal: Path) -> tuple[int, int] | None:
    """The WAL file's modification time and size: they move with every write, of any process."""
    try:
        info = os.stat(wal)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def stronger(a: News, b: News) -> News:
    """The news that says more of the two."""
    return a if a.value >= b.value else b


def os_source(wal: Path) -> ChangeSource:
    """inotify where the OS has it, else the stat poll."""
    if sys.platform.startswith("linux"):
        try:
            return InotifySource(wal)
        except (ImportError, OSError) as exc:  # no package, or the inotify instance limit is reached
            log.info("inotify unavailable (%s); long polls fall back to polling %s", exc, wal)
    return StatSource(wal)
