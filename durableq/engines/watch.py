"""Change notification: a watcher tells the waiters of one process that something committed to a
database.

A long poll must wake when any process (on PostgreSQL: any host) commits, and must cost nothing while
it waits.  Rather than each waiter polling, one thread per process and database (the *watcher*, shared
through :mod:`.watchers`) learns of commits and calls its listeners, which wake the waiters that should
look (``durableq.ops.longpoll``).

Where the watcher learns of a commit:

- this process's own commits: :meth:`Watcher.committed`, called by the engine after every commit that
  changed rows, wakes listeners at once;
- everyone else's: the engine's *change source* (:mod:`.change_sources`: inotify or a stat poll of a
  SQLite file's WAL; PostgreSQL's ``LISTEN``).

A change source may say only that something was written: under ``synchronous=FULL`` a SQLite commit
becomes visible after its fsync, a moment after its WAL frames.  So the watcher confirms with the
engine's *probe* (SQLite's ``PRAGMA data_version`` on a connection of its own) and, while the probe
shows nothing new, looks again every millisecond for a short while (*settling*).  A periodic probe while
someone listens covers anything a source could miss.

The watcher thread also runs small jobs for its listeners: timers (a delayed or in-flight message
becoming visible) and calls requested from other threads.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable

from .. import limits
from .change_sources import ChangeSource, News, Probe, stronger

log = logging.getLogger(__name__)

#: Selectors wait in whole milliseconds; shorter waits sleep instead.
_SELECTOR_RESOLUTION = 0.001

#: A listener gets the new generation number; it runs in the watcher thread.
Listener = Callable[[int], None]


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
    """Learns of commits to one database from every source and calls the listeners, in a thread of its own.

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
                news = stronger(news, self._source.read())
                if self._source.fileno is None:  # the source gave up its descriptor: poll it instead
                    self._selector.unregister(key.fileobj)
        if self._stopping:
            return
        now = time.monotonic()
        listening = bool(self._listeners)
        if self._source.fileno is None and listening and now >= self._next_read:
            news = stronger(news, self._source.read())
            self._next_read = now + self._source.interval
        if self._subscribed:
            self._subscribed = False
            news = stronger(news, News.MAYBE)  # a write before the first listener came may not show yet
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
        return min(limits.WATCH_LONGEST_WAIT, max(0.0, min(deadlines) - now)) if deadlines else None

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
