"""The broker's schedule calls: create, get, list, update, delete, and firing the due ticks.

Each management call writes its row and its audit row in one transaction, as the queue calls do
(``ops/audit.py``: the action is declared once, by :func:`~durableq.ops.audit.audited` on the method).
:class:`ScheduleCalls` is a base of :class:`~durableq.Broker`; the calls are documented there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from .. import limits, validation
from ..engines.base import Database
from ..errors import InvalidParameterValue, Reason
from ..ops import audit, broker_calls
from ..ops import schedules as rows
from ..ops.runtime import Runtime
from ..types import AttributeInput
from . import definition, firing
from .definition import Schedule
from .firing import FiringRound

#: The audit row's queue: the schedule's queue, which a success row names (a refusal names none).
_NO_QUEUE: Callable[..., object] = lambda *args, **kwargs: None  # noqa: E731


class ScheduleCalls:
    """The schedule calls of a broker (see the module)."""

    _rt: Runtime

    @property
    def _audit_target(self) -> tuple[Database, Callable[[], int]]:
        return self._rt.db, self._rt.now_ms

    @audit.audited("CreateSchedule", _NO_QUEUE)
    def create_schedule(
        self,
        /,
        name: str,
        queue: str,
        expression: str,
        body: str,
        *,
        attributes: Mapping[str, AttributeInput] | None = None,
        timezone: str = "UTC",
        start: datetime | None = None,
        end: datetime | None = None,
        flexible_window: int = limits.DEFAULT_FLEXIBLE_WINDOW,
        catch_up: str = limits.DEFAULT_CATCH_UP,
        enabled: bool = True,
    ) -> Schedule:
        """Send ``body`` (with ``attributes``) to ``queue`` at each tick of ``expression`` — ``rate(5
        minutes)``, ``rate(10 seconds)``, ``cron(0 12 ? * MON-FRI *)`` (EventBridge's six fields),
        ``at(2026-12-01T10:00:00)`` or a five-field cron line ``*/5 * * * *`` — read in ``timezone``
        (an IANA name), not before ``start`` nor after ``end``.  A rate counts from ``start``, else from
        now: its first tick is at once.  ``flexible_window`` (0-86,400 s) sends each tick at a random
        time that long after it at most; ``catch_up`` says what a scheduler does with ticks missed while
        none ran: ``"latest"`` (one send, for the latest), ``"all"`` (each, oldest first) or ``"none"``.
        Each message carries the attributes ``DurableQ.ScheduleName`` and ``DurableQ.ScheduledTime``;
        on a FIFO queue its group id is the schedule's name and its deduplication id the name and the
        scheduled time.  A ``durableq scheduler`` process (or :class:`durableq.Scheduler`) sends the
        ticks, each exactly once however many run.  The same name with the same definition returns the
        schedule; with another, ``InvalidParameterValue`` (``update_schedule`` changes one)."""
        checked_name = definition.name(name)
        given = {key: value for key, value in locals().items() if key in definition.KEYWORDS}
        return _create(self._rt, checked_name, definition.checked(given))

    def get_schedule(self, name: str) -> Schedule:
        """The schedule called ``name``; ``ResourceNotFoundException`` if there is none."""
        definition.name(name)
        with self._rt.db.statement() as conn:
            return definition.schedule_of(rows.get(conn, name))

    def list_schedules(self, prefix: str = "") -> list[Schedule]:
        """The schedules whose name starts with ``prefix``, by name."""
        validation.text("prefix", prefix)
        if prefix and not definition.could_start_a_name(prefix):
            return []  # (a NUL, say, which no name holds and PostgreSQL's text cannot)
        with self._rt.db.statement() as conn:
            found = rows.names(conn, prefix, limits.MAX_SCHEDULES_LISTED)
        return [definition.schedule_of(row) for row in found]

    @audit.audited("UpdateSchedule", _NO_QUEUE)
    def update_schedule(self, /, name: str, **changes: Any) -> Schedule:
        """Change the settings ``changes`` names (any keyword of :meth:`create_schedule`, and
        ``queue``, ``expression``, ``body``); the others stay.  A change of the timetable (expression,
        time zone, start, end) or a resume (``enabled=True``) counts the next tick afresh from now."""
        definition.name(name)
        if not changes:
            raise InvalidParameterValue(
                template="{parameter}: name at least one setting to change ({choices})",
                parameter="changes",
                choices=definition.KEYWORDS,
                reason=Reason.CHOICE,
            )
        return _update(self._rt, name, definition.checked(changes))

    @audit.audited("DeleteSchedule", _NO_QUEUE)
    def delete_schedule(self, name: str) -> None:
        """Delete the schedule called ``name`` (its messages already sent stay in their queue)."""
        definition.name(name)
        with self._rt.db.write() as conn:
            queue = rows.get(conn, name).queue
            rows.delete(conn, name)
            audit.succeeded(conn, self._rt.now_ms(), {"schedule": name}, queue=queue)

    def fire_due_schedules(self) -> FiringRound:
        """Claim and send every due tick (at most ``limits.SCHEDULER_BATCH`` claimed, sent or skipped;
        the next round takes the rest): what a scheduler does in each round.  Each tick is claimed and
        sent in one transaction, so of several callers at once one sends it; returns what was sent and
        when the next tick is due."""
        return firing.fire_due(self._rt)


def _create(rt: Runtime, name: str, given: dict[str, Any]) -> Schedule:
    now = rt.now_ms()
    row = definition.scheduled(
        rows.ScheduleRow(
            name=name,
            queue=given["queue"],
            expression=given["expression"],
            body=given["body"],
            attributes=given["attributes"],
            timezone=given["timezone"],
            start_at=given["start_at"],
            end_at=given["end_at"],
            flexible_window=given["flexible_window"],
            catch_up=given["catch_up"],
            enabled=given["enabled"],
            anchor_at=_anchor(given["start_at"], now),
            next_fire_at=None,
            send_at=None,
            last_fire_at=None,
            version=0,
            created_at=now,
            updated_at=now,
        ),
        now,
    )
    _check_ticks(row, now)
    with rt.db.write() as conn:
        # QueueDoesNotExist, or a message the queue cannot take, now rather than a skipped tick later
        firing.check_size(rt, conn, row)
        existing = rows.find(conn, name)
        if existing is None:
            rows.insert(conn, row)
        elif _definition(existing) != _definition(row):
            raise InvalidParameterValue(
                template="a schedule named {value!r} exists with another definition; "
                "update_schedule changes it, delete_schedule removes it",
                parameter="name",
                value=name,
                reason=Reason.EXISTS,
            )
        else:
            row = existing
        audit.succeeded(conn, now, {"schedule": name, "created": existing is None}, queue=row.queue)
    return definition.schedule_of(row)


def _definition(row: rows.ScheduleRow) -> tuple[object, ...]:
    """What two schedules of one name must share to be the same (not times they were made or fired)."""
    return (
        row.queue,
        row.expression,
        row.body,
        row.attributes,
        row.timezone,
        row.start_at,
        row.end_at,
        row.flexible_window,
        row.catch_up,
        row.enabled,
    )


#: Settings whose change counts the next tick afresh.
_TIMETABLE = ("expression", "timezone", "start_at", "end_at")


def _update(rt: Runtime, name: str, given: dict[str, Any]) -> Schedule:
    if "queue" in given:
        broker_calls.is_fifo(rt, given["queue"])
    with rt.db.write() as conn:
        now = rt.now_ms()
        old = rows.get(conn, name)
        row = replace(old, **given, updated_at=now)
        if "expression" in given or "start_at" in given:
            row = replace(row, anchor_at=_anchor(row.start_at, now))
        if any(key in given for key in _TIMETABLE) or (row.enabled and not old.enabled):
            row = definition.scheduled(row, now)
            _check_ticks(row, now)
        elif not row.enabled:
            row = replace(row, send_at=None)
        elif "flexible_window" in given:
            row = replace(row, send_at=definition.narrowed(row))
        firing.check_size(rt, conn, row)
        rows.update(conn, row)
        audit.succeeded(conn, now, {"schedule": name, "changed": sorted(given)}, queue=row.queue)
    return definition.schedule_of(replace(row, version=row.version + 1))


def _anchor(start: int | None, now: int) -> int:
    """Where a rate counts from: its start, else now, on a whole second (so are its ticks)."""
    return (now if start is None else start) // 1000 * 1000


def _check_ticks(row: rows.ScheduleRow, now: int) -> None:
    definition.check_times(row)
    if definition.current_tick(row, now) is None:
        raise InvalidParameterValue(
            template="{parameter} {value!r} has no tick from now on"
            + (" before its end" if row.end_at is not None else "")
            + " (an at() in the past, or a cron day that never comes)",
            parameter="expression",
            value=row.expression,
            reason=Reason.RANGE,
        )
