"""Message move tasks: moving messages out of a dead-letter queue, back to
their source queues or to a named destination, optionally at a maximum rate.

A task is a row in ``message_moves``; a thread of the broker that started it
moves messages in small transactions and reports progress in the row.  A
task whose runner stopped reporting (its process died) is marked FAILED the
next time anyone looks, so a new one can start; nothing is lost either way,
because every batch moves atomically.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from .. import limits, validation
from ..engines.base import Database
from ..errors import InvalidParameterValue, ResourceNotFoundException
from ..types import MoveTask, datetime_from_ms
from . import audit, queue_rows, relocation
from .counters import Counters
from .queue_rows import QueueConfig
from .sealing import Sealer

log = logging.getLogger(__name__)

_COLUMNS = (
    "task_handle, status, source, destination, max_per_second, moved, to_move, started_at, failure_reason"
)


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
        "UPDATE durableq_message_moves SET status = 'FAILED', failure_reason = ? "
        "WHERE source = ? AND status IN ('RUNNING', 'CANCELLING') AND heartbeat_at < ?",
        (
            "the process running the task stopped before it finished",
            source,
            _heartbeat() - int(limits.MOVE_TASK_STALE_AFTER * 1000),
        ),
    )


class MoveTasks:
    """Starts, lists and cancels the message move tasks of one broker, and runs those it starts."""

    def __init__(self, db: Database, clock_ms: Callable[[], int], counters: Counters, sealer: Sealer) -> None:
        self._sealer = sealer
        self._db = db
        self._clock_ms = clock_ms
        self._counters = counters
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
            if not queue_rows.dead_letter_sources(conn, source):
                # SQS's rule: moves take messages out of a dead-letter queue (back to their sources,
                # or to a destination); messages of any other queue have no source to go back to.
                raise InvalidParameterValue(
                    f"{source!r} is no queue's dead-letter queue: a message move task moves messages "
                    "out of a dead-letter queue; name it in a queue's redrive policy first"
                )
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
                "SELECT 1 FROM durableq_message_moves "
                "WHERE source = ? AND status IN ('RUNNING', 'CANCELLING')",
                (source,),
            ).fetchone():
                raise InvalidParameterValue(
                    f"a message move task is already running on {source!r}; cancel it first"
                )
            conn.execute(
                "INSERT INTO durableq_message_moves "
                "(task_handle, source, destination, max_per_second, status, moved, "
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
            audit.succeeded(
                conn,
                self._clock_ms(),
                {"task_handle": handle, "destination": destination, "max_per_second": max_per_second},
                queue=source,
            )
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
                f"SELECT {_COLUMNS} FROM durableq_message_moves "
                "WHERE source = ? ORDER BY started_at DESC, rowid DESC",
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
                "UPDATE durableq_message_moves SET status = 'CANCELLING' WHERE task_handle = ?",
                (task_handle,),
            )
            audit.succeeded(conn, self._clock_ms(), {"task_handle": task_handle}, queue=task.source)
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
            f"SELECT {_COLUMNS} FROM durableq_message_moves WHERE task_handle = ?", (task_handle,)
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
                    "UPDATE durableq_message_moves SET status = ?, failure_reason = ?, heartbeat_at = ? "
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
        rows = relocation.next_batch(conn, source, max(batch, 0), now)
        if not rows:
            self._set(conn, handle, "COMPLETED", None, 0)
            return None, None
        targets = relocation.by_destination(rows, task.destination)
        if None in targets:
            reason = "a message has no source queue to go back to; name a destination"
            self._set(conn, handle, "FAILED", reason, 0)
            return None, None
        moved = 0
        for target_name, row_ids in targets.items():
            target = queue_rows.find(conn, target_name) if target_name is not None else None
            if target is None or target.fifo != source.fifo:
                self._set(conn, handle, "FAILED", f"destination queue {target_name!r} does not exist", 0)
                return None, None
            kind = relocation.Kind.MOVE_TASK
            moved += relocation.move(conn, kind, source, target, row_ids, now, self._counters, self._sealer)
        self._set(conn, handle, "RUNNING", None, moved)
        return moved, task.max_per_second

    @staticmethod
    def _set(conn: Any, handle: str, status: str, reason: str | None, moved: int) -> None:
        conn.execute(
            "UPDATE durableq_message_moves "
            "SET status = ?, failure_reason = ?, moved = moved + ?, heartbeat_at = ? "
            "WHERE task_handle = ?",
            (status, reason, moved, _heartbeat(), handle),
        )


def _count(conn: Any, queue: QueueConfig) -> int:
    count: int = conn.execute(
        "SELECT count(*) FROM durableq_messages WHERE queue_id = ?", (queue.id,)
    ).fetchone()[0]
    return count
