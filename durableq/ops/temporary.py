"""Temporary queues: queues deleted after ``idle_timeout`` seconds without use, by any process.

A queue's last use is read from what the file already holds, so sends and
receives write nothing more for it: the newest per-minute counter row (any
send, receive, empty receive, move ... of that minute, counted as the end of
the minute), the newest message's enqueue time, its creation, and the
heartbeat (``touched_at``) that a process holding the queue writes every
quarter of its idle timeout.  A queue is therefore deleted between
``idle_timeout`` and ``idle_timeout`` + 1 minute (+ one reaping interval) after
its last use; a use in the last second before its process was killed may not
count (counters are written once per second).

Each broker looks for idle queues at most once per :data:`~durableq.limits.REAP_INTERVAL`
(broker clock): on management calls (create, list, temporary_queue) and from the
heartbeat thread of a broker that holds temporary queues.  One indexed lookup
per temporary queue; no message is read.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from .. import limits
from ..engines.base import Connection, Database
from ..errors import DatabaseError, DurableQError
from . import queue_rows
from .counters import MINUTE_MS, Counters
from .deletion import QueueDeleter
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

# (The latest of four times as the max of a UNION: both engines' SQL, where SQLite would write
# max(a, b, ...) and PostgreSQL greatest(a, b, ...).)
_IDLE = f"""
SELECT q.name FROM durableq_queues q
WHERE q.idle_timeout IS NOT NULL AND (SELECT max(t) FROM (
    SELECT q.created_at AS t
    UNION ALL SELECT coalesce(q.touched_at, 0)
    UNION ALL SELECT coalesce(
      (SELECT max(minute) FROM durableq_queue_metrics WHERE queue_id = q.id) + {MINUTE_MS}, 0)
    UNION ALL SELECT coalesce((SELECT max(enqueued_at) FROM durableq_messages WHERE queue_id = q.id), 0)
  ) AS latest) + q.idle_timeout * 1000 <= :now
ORDER BY q.name
"""
_TOUCH = "UPDATE durableq_queues SET touched_at = :now WHERE name = :name AND idle_timeout IS NOT NULL"
_INTERVAL_MS = int(limits.REAP_INTERVAL * 1000)


class TemporaryQueues:
    """One broker's temporary queues: heartbeats for those it holds, deleting one that ends, and
    reaping the idle ones of any process (each deletion by ``deletion.py``'s one path)."""

    def __init__(
        self, db: Database, clock_ms: Callable[[], int], counters: Counters, deleter: QueueDeleter
    ) -> None:
        self._db = db
        self._clock_ms = clock_ms
        self._counters = counters
        self._deleter = deleter
        self._held: dict[str, int] = {}  # name -> idle timeout (s)
        self._lock = threading.Lock()
        self._last_reap: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        _all_instances.add(self)

    def hold(self, name: str, idle_timeout: int) -> None:
        """Keep ``name`` alive with heartbeats while this broker is open (or until :meth:`release`)."""
        with self._lock:
            self._held[name] = idle_timeout
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="durableq-temporary-queues", daemon=True
                )
                self._thread.start()

    def release(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)

    def held(self) -> list[str]:
        with self._lock:
            return sorted(self._held)

    def maybe_reap(self) -> list[str]:
        """Heartbeat the held queues and delete idle ones, unless done within the interval; returns
        the names deleted."""
        now = self._clock_ms()
        last = self._last_reap
        if last is not None and 0 <= now - last < _INTERVAL_MS:
            return []
        self._last_reap = now
        try:
            return self.reap(now)
        except DatabaseError:  # a read-only, locked or full file: the call that asked goes on
            log.warning("could not look for idle temporary queues (will retry)", exc_info=True)
            return []

    def reap(self, now: int) -> list[str]:
        """Heartbeat the held queues, then delete every temporary queue idle at ``now``."""
        self._counters.flush()  # this process's uses of the last second count too
        held = self.held()
        if not held:  # nothing to heartbeat: write only if something is idle (a read first)
            with self._db.statement() as conn:
                if conn.execute(_IDLE, {"now": now}).fetchone() is None:
                    return []

        def idle(conn: Connection, now: int) -> list[tuple[QueueConfig, dict[str, Any]]]:
            conn.executemany(_TOUCH, [{"now": now, "name": name} for name in held])
            names = [name for (name,) in conn.execute(_IDLE, {"now": now}).fetchall()]
            queues = [queue_rows.load(conn, name) for name in names]
            return [(queue, {"reason": "idle", "idle_timeout": queue.idle_timeout}) for queue in queues]

        reaped = self._deleter.delete_chosen(idle, now)
        for name in reaped:
            self.release(name)
            log.info("deleted temporary queue %s: idle for its idle timeout", name)
        return reaped

    def end(self, name: str) -> None:
        """Delete the temporary queue ``name`` now (its ``delete_queue``, the end of its ``with`` block,
        its broker's close), and hold it no more; nothing if it is gone already."""
        self.release(name)

        def itself(conn: Connection, now: int) -> list[tuple[QueueConfig, dict[str, Any]]]:
            queue = queue_rows.find(conn, name)
            return [] if queue is None else [(queue, {"reason": "temporary"})]

        self._deleter.delete_chosen(itself, self._clock_ms())

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                timeouts = list(self._held.values())
            beat = min([*timeouts, limits.DEFAULT_IDLE_TIMEOUT]) / 4
            if self._stop.wait(min(beat, limits.REAP_INTERVAL)):
                return
            try:
                self.reap(self._clock_ms())
            except DurableQError:
                log.warning("could not heartbeat or reap temporary queues (will retry)", exc_info=True)

    def _forked(self) -> None:
        # The parent holds its queues and runs its thread; a forked child starts with neither.
        self._held = {}
        self._thread = None
        self._lock = threading.Lock()


_all_instances: weakref.WeakSet[TemporaryQueues] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for instance in list(_all_instances):
        instance._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
