"""The per-minute counters of each queue: buffered in memory, flushed to
``queue_metrics`` at least once per second.

Counting inside every send, receive and delete would add a page to each
commit (about a third of a send's cost), so each broker adds up its own
counts and writes them in one small transaction per second, when it closes,
and when the interpreter exits.  Messages never depend on counters; a
process killed with SIGKILL can lose at most its last second of counts.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref

from ..engines.base import Connection, Database
from ..errors import DurableQError
from ..types import COUNTERS

log = logging.getLogger(__name__)

MINUTE_MS = 60_000
FLUSH_INTERVAL = 1.0
#: The per-minute counters: ``queue_metrics`` columns, in the order of ``MinuteMetrics``, which
#: declares them.  ``moved_to_dead_letter`` leave a queue for its dead-letter queue; ``moved_out``
#: leave it by a message move task; ``moved_in`` arrive by either kind of move; ``purged`` go by a purge.
COLUMNS = tuple(COUNTERS)
# Positions of the counts in a pending row.
SENT = COLUMNS.index("sent")
RECEIVED = COLUMNS.index("received")
DELETED = COLUMNS.index("deleted")
MOVED = COLUMNS.index("moved_to_dead_letter")
EXPIRED = COLUMNS.index("expired")
EMPTY_RECEIVES = COLUMNS.index("empty_receives")
MOVED_IN = COLUMNS.index("moved_in")
MOVED_OUT = COLUMNS.index("moved_out")
PURGED = COLUMNS.index("purged")

# Counts are kept by queue name; a queue deleted meanwhile takes its counts with it.
_UPSERT = f"""
INSERT INTO durableq_queue_metrics (queue_id, minute, {", ".join(COLUMNS)})
SELECT id, :minute, {", ".join(f":{c}" for c in COLUMNS)} FROM durableq_queues WHERE name = :queue
ON CONFLICT (queue_id, minute) DO UPDATE SET
  {", ".join(f"{c} = durableq_queue_metrics.{c} + excluded.{c}" for c in COLUMNS)}
"""


def write_now(conn: Connection, queue: str, now: int, kind: int, count: int) -> None:
    """Count ``count`` events of ``kind`` of ``queue`` in the caller's transaction, at once: inside a
    transaction of the application's (``Broker.transaction``), the counts commit or roll back with
    it, so a rolled-back send is never counted."""
    row = [0] * len(COLUMNS)
    row[kind] = count
    conn.execute(_UPSERT, dict(zip(COLUMNS, row), queue=queue, minute=now - now % MINUTE_MS))


class Counters:
    """Counts of one broker not yet written, keyed by (queue name, minute)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: dict[tuple[str, int], list[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        atexit.register(_flush_at_exit, weakref.ref(self))
        _all_counters.add(self)

    def add(self, queue: str, now: int, kind: int, count: int = 1) -> None:
        """Count ``count`` events of ``kind`` (SENT, RECEIVED, ...) of ``queue`` in the minute of ``now``."""
        key = (queue, now - now % MINUTE_MS)
        with self._lock:
            row = self._pending.get(key)
            if row is None:
                row = self._pending[key] = [0] * len(COLUMNS)
            row[kind] += count
            if self._flusher is None and not self._stop.is_set():
                self._flusher = threading.Thread(target=self._run, name="durableq-counters", daemon=True)
                self._flusher.start()

    def flush(self) -> None:
        """Write what is pending, in one transaction; on failure keep it for the next try."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        rows = [dict(zip(COLUMNS, counts), queue=q, minute=m) for (q, m), counts in pending.items()]
        try:
            with self._db.write() as conn:
                conn.executemany(_UPSERT, rows)
        except DurableQError:
            with self._lock:
                for key, counts in pending.items():
                    row = self._pending.setdefault(key, [0] * len(COLUMNS))
                    for i, n in enumerate(counts):
                        row[i] += n
            raise

    def close(self) -> None:
        self._stop.set()
        flusher = self._flusher
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join()
        self.flush()

    def _forked(self) -> None:
        # A forked child inherits its parent's pending counts: the parent writes them, not us.
        self._pending = {}
        self._flusher = None
        self._lock = threading.Lock()

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            try:
                self.flush()
            except DurableQError:
                log.warning("could not write queue counters (will retry)", exc_info=True)


_all_counters: weakref.WeakSet[Counters] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for counters in list(_all_counters):
        counters._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _flush_at_exit(ref: weakref.ref[Counters]) -> None:
    counters = ref()
    if counters is not None and not counters._stop.is_set():
        try:
            counters.flush()
        except Exception:
            log.debug("counters not written at exit", exc_info=True)
