"""Message move tasks: moving messages out of a dead-letter queue, back to
their source queues or to a named destination, optionally at a maximum rate.

A task is a row in ``message_moves``; a thread of the broker that started it
moves messages in small transactions and reports progress in the row.  A
task whose runner stopped reporting (its process died) is marked FAILED the
next time anyone looks, so a new one can start; nothing is lost either way,
because every batch moves atomically.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from .. import limits
from ..engines.sqlite import Database
from ..errors import InvalidParameterValue, ResourceNotFoundException
from ..types import MoveTask, datetime_from_ms
from . import fifo, queue_rows, validation
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

_COLUMNS = (
    "task_handle, status, source, destination, max_per_second, moved, to_move, started_at, failure_reason"
)
# Everything but messages in flight: a consumer holding one keeps it until it lets go.
_NEXT_BATCH = """
SELECT id, group_id, dead_letter_source FROM messages
WHERE queue_id = ? AND NOT (receipt_handle IS NOT NULL AND visible_at > ?)
ORDER BY enqueued_at, id LIMIT ?
"""
_MOVE_STANDARD = """
UPDATE messages SET queue_id = :queue_id, dead_letter_source = NULL, receive_count = 0,
  visible_at = :now, receipt_handle = NULL, received_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids))
"""


def _task(row: tuple[Any, ...]) -> MoveTask:
    handle, status, source, destination, rate, moved, to_move, started_at, reason = row
    return MoveTask(
        handle, status, source, destination, rate, moved, to_move, datetime_from_ms(started_at), reason
    )


def _heartbeat() -> int:
    # Liveness is about real processes, so it reads the real clock, not the broker's.
    return int(time.time() * 1000)


def _fail_stale(conn: Any, source: str) -> None:
    conn.execute(
        "UPDATE message_moves SET status = 'FAILED', failure_reason = ? "
        "WHERE source = ? AND status IN ('RUNNING', 'CANCELLING') AND heartbeat_at < ?",
        (
            "the process running the task stopped before it finished",
            source,
            _heartbeat() - int(limits.MOVE_TASK_STALE_AFTER * 1000),
        ),
    )


class MoveTasks:
    """Starts, lists and cancels the message move tasks of one broker, and runs those it starts."""

    def __init__(self, db: Database, clock_ms: Callable[[], int]) -> None:
        self._db = db
        self._clock_ms = clock_ms
        self._runners: dict[str, threading.Thread] = {}
        self._stop = threading.Event()

    def start(self, source: str, destination: str | None, max_per_second: int | None) -> MoveTask:
        validation.queue_name(source)
        if destination is not None:
            validation.queue_name(destination)
        if max_per_second is not None:
            validation.integer(
                "max_per_second", max_per_second, 1, limits.MAX_MOVE_RATE, "messages per second"
            )
        handle = str(uuid.uuid4())
        with self._db.write() as conn:
            src = queue_rows.load(conn, source)
            if destination is not None:
                dst = queue_rows.load(conn, destination)
                if dst.fifo != src.fifo:
                    raise InvalidParameterValue(
                        f"messages of {source!r} can only move to a queue of the same type; "
                        f"{destination!r} is not"
                    )
                if dst.id == src.id:
                    raise InvalidParameterValue(
                        "a message move task needs a destination other than its source"
                    )
            _fail_stale(conn, source)
            if conn.execute(
                "SELECT 1 FROM message_moves WHERE source = ? AND status IN ('RUNNING', 'CANCELLING')",
                (source,),
            ).fetchone():
                raise InvalidParameterValue(
                    f"a message move task is already running on {source!r}; cancel it first"
                )
            conn.execute(
                "INSERT INTO message_moves (task_handle, source, destination, max_per_second, status, moved, "
                "to_move, started_at, heartbeat_at) VALUES (?, ?, ?, ?, 'RUNNING', 0, ?, ?, ?)",
                (
                    handle,
                    source,
                    destination,
                    max_per_second,
                    _count(conn, src),
                    self._clock_ms(),
                    _heartbeat(),
                ),
            )
            task = self._load(conn, handle)
        runner = threading.Thread(
            target=self._run, args=(handle,), name=f"durableq-move-{handle[:8]}", daemon=True
        )
        self._runners[handle] = runner
        runner.start()
        return task

    def list(self, source: str) -> list[MoveTask]:
        """Tasks of ``source``, newest first."""
        validation.queue_name(source)
        with self._db.write() as conn:
            queue_rows.load(conn, source)
            _fail_stale(conn, source)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM message_moves WHERE source = ? ORDER BY started_at DESC, rowid DESC",
                (source,),
            ).fetchall()
        return [_task(row) for row in rows]

    def cancel(self, task_handle: str) -> MoveTask:
        validation.text("task_handle", task_handle)
        with self._db.write() as conn:
            task = self._load(conn, task_handle)
            _fail_stale(conn, task.source)
            task = self._load(conn, task_handle)
            if task.status != "RUNNING":
                raise InvalidParameterValue(
                    f"message move task {task_handle!r} is {task.status}; "
                    "only a RUNNING task can be cancelled"
                )
            conn.execute(
                "UPDATE message_moves SET status = 'CANCELLING' WHERE task_handle = ?", (task_handle,)
            )
            return self._load(conn, task_handle)

    def wait(self, task_handle: str, timeout: float | None = None) -> None:
        """Block until the runner of a task started here ends (tests and the CLI use this)."""
        runner = self._runners.get(task_handle)
        if runner is not None:
            runner.join(timeout)

    def close(self) -> None:
        self._stop.set()
        for runner in list(self._runners.values()):
            runner.join()

    # -- the runner ----------------------------------------------------------

    @staticmethod
    def _load(conn: Any, task_handle: object) -> MoveTask:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM message_moves WHERE task_handle = ?", (task_handle,)
        ).fetchone()
        if row is None:
            raise ResourceNotFoundException(f"there is no message move task {task_handle!r}")
        return _task(row)

    def _run(self, handle: str) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                with self._db.write() as conn:
                    moved, rate = self._step(conn, handle)
                if moved is None:
                    return
                if rate:
                    # Pace batches so that no second moves more than max_per_second.
                    self._stop.wait(max(moved / rate - (time.monotonic() - started), 0))
            self._finish(handle, "FAILED", "the broker running the task was closed before it finished")
        except Exception as exc:  # a runner must record why it ended, whatever happened
            log.exception("message move task %s failed", handle)
            self._finish(handle, "FAILED", f"{type(exc).__name__}: {exc}")

    def _finish(self, handle: str, status: str, reason: str | None) -> None:
        try:
            with self._db.write() as conn:
                conn.execute(
                    "UPDATE message_moves SET status = ?, failure_reason = ?, heartbeat_at = ? "
                    "WHERE task_handle = ? AND status IN ('RUNNING', 'CANCELLING')",
                    (status, reason, _heartbeat(), handle),
                )
        except Exception:  # pragma: no cover - the database itself is failing
            log.exception("could not record the end of message move task %s", handle)

    def _step(self, conn: Any, handle: str) -> tuple[int | None, int | None]:
        """Move one batch; returns how many moved (None when the task ended) and its rate."""
        task = self._load(conn, handle)
        if task.status == "CANCELLING":
            self._set(conn, handle, "CANCELLED", None, 0)
            return None, None
        if task.status != "RUNNING":
            return None, None
        source = queue_rows.find(conn, task.source)
        if source is None:
            self._set(conn, handle, "FAILED", f"source queue {task.source!r} was deleted", 0)
            return None, None
        batch = min(
            limits.MOVE_TASK_BATCH, task.max_per_second or limits.MOVE_TASK_BATCH, task.to_move - task.moved
        )
        now = self._clock_ms()
        rows = conn.execute(_NEXT_BATCH, (source.id, now, max(batch, 0))).fetchall()
        if not rows:
            self._set(conn, handle, "COMPLETED", None, 0)
            return None, None
        by_target: dict[str, list[tuple[int, str | None]]] = {}
        for row_id, group_id, dead_letter_source in rows:
            target = task.destination or dead_letter_source
            if target is None:
                self._set(
                    conn,
                    handle,
                    "FAILED",
                    "a message has no source queue to go back to; name a destination",
                    0,
                )
                return None, None
            by_target.setdefault(target, []).append((row_id, group_id))
        for target_name, moving in by_target.items():
            target = queue_rows.find(conn, target_name)
            if target is None or target.fifo != source.fifo:
                self._set(conn, handle, "FAILED", f"destination queue {target_name!r} does not exist", 0)
                return None, None
            _move(conn, source, target, moving, now)
        self._set(conn, handle, "RUNNING", None, len(rows))
        return len(rows), task.max_per_second

    @staticmethod
    def _set(conn: Any, handle: str, status: str, reason: str | None, moved: int) -> None:
        conn.execute(
            "UPDATE message_moves SET status = ?, failure_reason = ?, moved = moved + ?, heartbeat_at = ? "
            "WHERE task_handle = ?",
            (status, reason, moved, _heartbeat(), handle),
        )


def _count(conn: Any, queue: QueueConfig) -> int:
    count: int = conn.execute("SELECT count(*) FROM messages WHERE queue_id = ?", (queue.id,)).fetchone()[0]
    return count


def _move(
    conn: Any, source: QueueConfig, target: QueueConfig, rows: list[tuple[int, str | None]], now: int
) -> None:
    """Move rows to ``target`` as new arrivals there: visible, received 0 times."""
    if source.fifo:
        groups = [(row_id, group) for row_id, group in rows if group is not None]
        fifo.append_moved(conn, target, groups, now, "dead_letter_source = NULL, receive_count = 0", {})
        fifo.refresh_groups(conn, source.id, (g for _, g in groups))
    else:
        conn.execute(
            _MOVE_STANDARD, {"queue_id": target.id, "now": now, "ids": json.dumps([r for r, _ in rows])}
        )
