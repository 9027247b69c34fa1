"""Change notification: one watcher per process and database file tells waiters that something committed.

A long poll must wake when any process commits to the file, and must cost
nothing while it waits.  Rather than each waiter polling, one thread per
process and file (the *watcher*) learns of commits and calls its listeners,
which wake the waiters that should look (``durableq.ops.longpoll``).

Where the watcher learns of a commit (its *change sources*):

- this process's own commits: :meth:`Watcher.committed`, called by the engine
  after every commit that changed rows, wakes listeners at once;
- the operating system: on Linux, inotify on the WAL file (every commit of
  any process appends frames to it), via ``inotify_simple``;
- elsewhere (or when inotify is unavailable), a poll of the WAL file's
  ``stat`` stamp every few milliseconds, only while someone listens;
- on PostgreSQL, ``LISTEN``/``NOTIFY`` (:mod:`.postgres`): a socket that becomes
  readable at each commit of any host.

An OS event says only that the WAL was written: under ``synchronous=FULL``
the commit becomes visible after its fsync, a moment later.  So the watcher
confirms with the engine's *probe* (SQLite's ``PRAGMA data_version`` on a
connection of its own) and, while the probe shows nothing new, looks again
every millisecond for a short while (*settling*).  A periodic probe while
someone listens covers anything an OS could miss.

The watcher thread also runs small jobs for its listeners: timers (a delayed
or in-flight message becoming visible) and calls requested from other threads.
"""

from __future__ import annotations

import enum
import heapq
import importlib
import itertools
import logging
import os
import selectors
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, Protocol

from .. import limits
from ..errors import BrokerClosed

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

#: Selectors wait in whole milliseconds; shorter waits sleep instead.
_SELECTOR_RESOLUTION = 0.001

#: A listener gets the new generation number; it runs in the watcher thread.
Listener = Callable[[int], None]


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


def _stronger(a: News, b: News) -> News:
    return a if a.value >= b.value else b


def os_source(wal: Path) -> ChangeSource:
    """inotify where the OS has it, else the stat poll."""
    if sys.platform.startswith("linux"):
        try:
            return InotifySource(wal)
        except (ImportError, OSError) as exc:  # no package, or the inotify instance limit is reached
            log.info("inotify unavailable (%s); long polls fall back to polling %s", exc, wal)
    return StatSource(wal)


class TimerHandle:
    """A job the watcher runs at a time; ``cancel()`` before then and it never runs."""

    __slots__ = ("cancelled", "job", "when")

    def __init__(self, when: float, job: Callable[[], None]) -> None:
        self.when = when
        self.job = job
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Watcher:
    """Learns of commits to one file from every source and calls the listeners, in a thread of its own.

    ``generation`` grows by one for every change the watcher has passed on: a
    waiter that reads it before looking at the database, and finds it moved
    after, knows it may have missed something.
    """

    def __init__(self, source: ChangeSource, probe: Probe, name: str) -> None:
        self._source = source
        self._probe = probe
        self._lock = threading.Lock()
        self._listeners: dict[Listener, None] = {}
        self._timers: list[tuple[float, int, TimerHandle]] = []
        self._jobs: deque[Callable[[], None]] = deque()
        self._order = itertools.count()
        self._local = False  # a commit of this process is waiting to be passed on
        self._subscribed = False  # the first listener came since the last turn
        self._poked = False  # a byte is in the wake-up pipe
        self._stopping = False
        self.generation = 0
        self._version = probe()
        self._settle_since = self._settle_until = 0.0
        self._next_read = self._next_confirm = 0.0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        if source.fileno is not None:
            self._selector.register(source.fileno, selectors.EVENT_READ, source)
        self._thread = threading.Thread(target=self._run, name=f"durableq-watch {name}", daemon=True)
        self._thread.start()

    # -- from any thread ---------------------------------------------------------

    @property
    def listening(self) -> bool:
        return bool(self._listeners)

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(generation)`` in the watcher thread after every change, until unsubscribed."""
        with self._lock:
            if not self._listeners:
                self._subscribed = True
            self._listeners[listener] = None
        self._poke()  # a polled source starts polling

    def unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.pop(listener, None)

    def committed(self) -> None:
        """This process committed a change: pass it on now (cheap when nobody listens)."""
        if self._listeners:
            self._local = True
            self._poke()

    def call_soon(self, job: Callable[[], None]) -> None:
        """Run ``job()`` in the watcher thread, soon."""
        with self._lock:
            self._jobs.append(job)
        self._poke()

    def call_later(self, delay: float, job: Callable[[], None]) -> TimerHandle:
        """Run ``job()`` in the watcher thread ``delay`` seconds from now (unless cancelled)."""
        handle = TimerHandle(time.monotonic() + max(0.0, delay), job)
        with self._lock:
            heapq.heappush(self._timers, (handle.when, next(self._order), handle))
        if threading.current_thread() is not self._thread:
            self._poke()
        return handle

    def close(self) -> None:
        """Stop the thread and let go of the source and the probe."""
        self._stopping = True
        self._poke()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _poke(self) -> None:
        if not self._poked:
            self._poked = True
            try:
                os.write(self._wake_w, b"\0")
            except (BlockingIOError, OSError):  # the pipe is full (the thread is waking anyway) or closed
                pass

    # -- the watcher thread ------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._turn()
        except Exception:  # a bug here must not pass silently: waiters fall back on their deadlines
            log.exception("the change watcher stopped")
        finally:
            self._shut()

    def _turn(self) -> None:
        """One turn of the thread: wait for news, a job or a timer; pass changes on; run what is due."""
        now = time.monotonic()
        timeout = self._timeout(now)
        if timeout is not None and 0 < timeout < _SELECTOR_RESOLUTION:
            time.sleep(timeout)  # finer than a selector can wait
            timeout = 0
        news = News.NOTHING
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._drain_wake_pipe()
            else:
                news = _stronger(news, self._source.read())
                if self._source.fileno is None:  # the source gave up its descriptor: poll it instead
                    self._selector.unregister(key.fileobj)
        if self._stopping:
            return
        now = time.monotonic()
        listening = bool(self._listeners)
        if self._source.fileno is None and listening and now >= self._next_read:
            news = _stronger(news, self._source.read())
            self._next_read = now + self._source.interval
        if self._subscribed:
            self._subscribed = False
            news = _stronger(news, News.MAYBE)  # a write before the first listener came may not show yet
        changed = self._take_local() or (listening and news is News.COMMITTED)
        if listening and news is News.MAYBE:
            # Frames were written: look often until the probe shows the commit, and for a while
            # after (a change found may be an older commit; the one just written may follow).
            # Our own commits' writes cause this too: they cannot be told from another
            # process's writes, which may still wait for their fsync.
            self._settle_since = now
            self._settle_until = now + limits.WATCH_SETTLE_LIMIT
        if listening and (self._settle_until or now >= self._next_confirm):
            changed = self._confirm() or changed
            self._next_confirm = now + limits.WATCH_CONFIRM_INTERVAL
            if now >= self._settle_until:
                self._settle_until = 0.0
        if changed:
            self._refresh_version()
            self._pass_on()
        self._run_due()

    def _timeout(self, now: float) -> float | None:
        """How long the next turn may wait for news (None: until poked)."""
        deadlines = []
        with self._lock:
            if self._jobs:
                return 0
            if self._timers:
                deadlines.append(self._timers[0][0])
        if self._listeners:
            deadlines.append(self._next_confirm)
            if self._source.fileno is None:
                deadlines.append(self._next_read)
            if self._settle_until:
                # The commit usually shows within microseconds (synchronous NORMAL) or after one
                # fsync (FULL): look often at first, then less and less.
                step = (now - self._settle_since) / 8
                deadlines.append(now + min(limits.WATCH_SETTLE_MAX_STEP, max(limits.WATCH_SETTLE_STEP, step)))
        return max(0.0, min(deadlines) - now) if deadlines else None

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        self._poked = False  # after draining: a poke from now on writes a new byte

    def _take_local(self) -> bool:
        local, self._local = self._local, False
        return local

    def _confirm(self) -> bool:
        """Did anything commit since the last look?  (The probe is the authority.)"""
        version = self._probe_version()
        if version is None or version == self._version:
            return False
        self._version = version
        return True

    def _refresh_version(self) -> None:
        # A change passed on also covers whatever the probe shows now: the OS event
        # that our own commit raises a moment later is then no news.
        version = self._probe_version()
        if version is not None:
            self._version = version

    def _probe_version(self) -> int | None:
        try:
            return self._probe()
        except Exception:  # a busy or closed file: look again at the next tick
            log.debug("the change probe failed", exc_info=True)
            return None

    def _pass_on(self) -> None:
        self.generation += 1
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            self._guarded(listener, self.generation)

    def _run_due(self) -> None:
        now = time.monotonic()
        due: list[Callable[[], None]] = []
        with self._lock:
            while self._jobs:
                due.append(self._jobs.popleft())
            while self._timers and self._timers[0][0] <= now:
                handle = heapq.heappop(self._timers)[2]
                if not handle.cancelled:
                    due.append(handle.job)
        for job in due:
            self._guarded(job)

    @staticmethod
    def _guarded(job: Callable[..., None], *args: int) -> None:
        try:
            job(*args)
        except Exception:  # one listener's bug must not stop the others' wake-ups
            log.exception("a change listener failed")

    def _shut(self) -> None:
        self._selector.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._source.close()
        self._probe.close()


# -- one watcher per process and file --------------------------------------------------

_registry: dict[Hashable, tuple[Watcher, int]] = {}
_registry_lock = threading.Lock()


def file_key(database: Path) -> tuple[int, int]:
    """The registry key of a database file (its device and inode: one watcher however it is named)."""
    info = os.stat(database)
    return (info.st_dev, info.st_ino)


def acquire(
    key: Hashable, name: str, open_source: Callable[[], ChangeSource], open_probe: Callable[[], Probe]
) -> tuple[Hashable, Watcher]:
    """The watcher of the database ``key`` names (started on first use); give the key back to
    :func:`release`."""
    with _registry_lock:
        entry = _registry.get(key)
        if entry is None:
            watcher = Watcher(open_source(), open_probe(), name)
            _registry[key] = (watcher, 1)
            return key, watcher
        _registry[key] = (entry[0], entry[1] + 1)
        return key, entry[0]


class Watching:
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
        self.current: Watcher | None = None

    def get(self) -> Watcher:
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
_inherited: list[Watcher] = []


os.register_at_fork(after_in_child=_after_fork_in_child)
