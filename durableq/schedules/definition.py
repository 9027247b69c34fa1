"""A schedule's definition: its arguments checked, its next tick, and the :class:`Schedule` value.

A schedule's ticks are its expression's (``expressions.py``), not before ``start`` and not after
``end``.  A tick's *send time* is the tick itself, or, with a ``flexible_window`` of W seconds, a time
drawn at random in ``[tick, tick + W)``, as EventBridge spreads a flexible window's invocations; the
message's ``DurableQ.ScheduledTime`` is always the tick.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from .. import limits, validation
from ..errors import InvalidParameterValue, Reason
from ..ops import attributes as message_attributes
from ..ops.schedules import ScheduleRow
from ..types import Attribute, datetime_from_ms
from . import expressions

_NAME = re.compile(r"[0-9A-Za-z_.-]+")
#: The schedule's own attributes leave room for the two durableq adds.
MAX_ATTRIBUTES = limits.MAX_MESSAGE_ATTRIBUTES - 2
RESERVED = (limits.SCHEDULE_NAME_ATTRIBUTE, limits.SCHEDULED_TIME_ATTRIBUTE)


@dataclass(frozen=True)
class Schedule:
    """A schedule: ``body`` (with ``attributes``) sent to ``queue`` at each tick of ``expression``,
    read in ``timezone``, from ``start`` to ``end``.  ``next_fire`` is the scheduled time of its next
    tick (None: none is left, or it is paused); ``last_fire`` that of the last tick sent."""

    name: str
    queue: str
    expression: str
    body: str
    attributes: dict[str, Attribute]
    timezone: str
    start: datetime | None
    end: datetime | None
    flexible_window: int
    catch_up: str
    enabled: bool
    next_fire: datetime | None
    last_fire: datetime | None
    created_at: datetime
    updated_at: datetime


def schedule_of(row: ScheduleRow) -> Schedule:
    def moment(ms: int | None) -> datetime | None:
        return None if ms is None else datetime_from_ms(ms)

    return Schedule(
        row.name,
        row.queue,
        row.expression,
        row.body,
        message_attributes.decode(row.attributes),
        row.timezone,
        moment(row.start_at),
        moment(row.end_at),
        row.flexible_window,
        row.catch_up,
        row.enabled,
        moment(row.next_fire_at) if row.enabled else None,
        moment(row.last_fire_at),
        datetime_from_ms(row.created_at),
        datetime_from_ms(row.updated_at),
    )


def name(value: object) -> str:
    """A schedule's name: 1-64 characters of ``[0-9A-Za-z_.-]`` (EventBridge Scheduler's rule)."""
    if (
        not isinstance(value, str)
        or not _NAME.fullmatch(value)
        or len(value) > limits.MAX_SCHEDULE_NAME_LENGTH
    ):
        raise InvalidParameterValue(
            template="{parameter} must be 1 to {high} characters of letters, digits, _ . and -; "
            "got {value!r}",
            parameter="name",
            value=value,
            high=limits.MAX_SCHEDULE_NAME_LENGTH,
            reason=Reason.FORM,
        )
    return value


def could_start_a_name(prefix: str) -> bool:
    """Whether a schedule's name may start with ``prefix``."""
    return bool(_NAME.fullmatch(prefix)) and len(prefix) <= limits.MAX_SCHEDULE_NAME_LENGTH


#: The keywords of ``create_schedule`` after its four positional arguments, and what they may change.
KEYWORDS = (
    "queue",
    "expression",
    "body",
    "attributes",
    "timezone",
    "start",
    "end",
    "flexible_window",
    "catch_up",
    "enabled",
)


def checked(values: Mapping[str, Any]) -> dict[str, Any]:
    """The given arguments (``KEYWORDS``), checked, as the row's columns hold them."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "queue":
            out["queue"] = validation.queue_name(value)
        elif key == "expression":
            out["expression"] = expressions.parse(value).text
        elif key == "body":
            out["body"] = validation.body(value)
        elif key == "attributes":
            out["attributes"] = message_attributes.encode(_attributes(value))
        elif key == "timezone":
            out["timezone"] = _timezone(value)
        elif key in ("start", "end"):
            out[f"{key}_at"] = None if value is None else _moment(key, value)
        elif key == "flexible_window":
            out[key] = validation.integer(key, value, 0, limits.MAX_FLEXIBLE_WINDOW)
        elif key == "catch_up":
            out[key] = validation.choice(key, value, limits.CATCH_UP_MODES)
        elif key == "enabled":
            if not isinstance(value, bool):
                raise InvalidParameterValue(f"enabled must be True or False; got {value!r}")
            out[key] = value
        else:
            raise InvalidParameterValue(
                template="{value!r} is not a setting of a schedule; the settings are {choices}",
                parameter="changes",
                value=key,
                choices=KEYWORDS,
                reason=Reason.UNKNOWN,
            )
    return out


#: Names tzdata gives a host's own setting: another host (another scheduler) reads them otherwise.
_HOST_ZONES = ("localtime", "posixrules")


def _timezone(name: object) -> str:
    """``name`` as a schedule's time zone: an IANA name (``expressions.zone``) that means the same on every
    host, so that every scheduler counts the same ticks (``localtime`` is refused: it is each host's)."""
    if isinstance(name, str) and name in _HOST_ZONES:
        raise InvalidParameterValue(
            template="{parameter} {value!r} is this host's own setting, which another scheduler's host reads "
            "otherwise; name the zone, such as UTC or Europe/Paris",
            parameter="timezone",
            value=name,
            reason=Reason.FORM,
        )
    expressions.zone(name)
    return str(name)


#: ``start`` and ``end`` lie within the years an expression can name (epoch ms).
_LAST_MOMENT = int(datetime(limits.MAX_CRON_YEAR + 1, 1, 1, tzinfo=UTC).timestamp() * 1000) - 1


def _moment(name: str, value: object) -> int:
    moment = validation.moment(name, value)
    if not 0 <= moment <= _LAST_MOMENT:
        raise InvalidParameterValue(
            template="{parameter} must be from 1970 to the end of {high}; got {value}",
            parameter=name,
            value=value.isoformat() if isinstance(value, datetime) else value,  # (not a repr)
            high=limits.MAX_CRON_YEAR,
            reason=Reason.RANGE,
        )
    return moment


def _attributes(value: object) -> dict[str, Attribute]:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidParameterValue(
            f"attributes must be a mapping of name to value; got {type(value).__name__}"
        )
    if value is not None and len(value) > MAX_ATTRIBUTES:
        raise InvalidParameterValue(
            template="a schedule holds at most {high} attributes (durableq adds two to each message); "
            "got {value}",
            parameter="attributes",
            value=len(value),
            high=MAX_ATTRIBUTES,
            reason=Reason.TOO_MANY,
        )
    typed = message_attributes.normalize(value)
    for reserved in RESERVED:
        if reserved.lower() in (key.lower() for key in typed):
            raise InvalidParameterValue(
                template="the attribute name {value!r} is durableq's own "
                "(it sets it on each scheduled message)",
                parameter="attributes",
                value=reserved,
                reason=Reason.FORM,
            )
    return typed


def check_times(row: ScheduleRow) -> None:
    """``start`` before ``end``, and a size the queue will take (checked again at each send)."""
    if row.start_at is not None and row.end_at is not None and row.end_at <= row.start_at:
        raise InvalidParameterValue(
            template=f"{{parameter}} must come after start ({expressions.iso(row.start_at)}); got {{value}}",
            parameter="end",
            value=expressions.iso(row.end_at),
            reason=Reason.CONFLICT,
        )


def next_tick(row: ScheduleRow, after: int) -> int | None:
    """The schedule's first tick after ``after`` (epoch ms), within ``start`` and ``end``."""
    expression = expressions.parse(row.expression)
    bound = after if row.start_at is None else max(after, row.start_at - 1)  # not before start
    tick = expression.following(bound, expressions.zone(row.timezone), row.anchor_at)
    if tick is None or (row.end_at is not None and tick > row.end_at):
        return None
    return tick


def latest_tick(row: ScheduleRow, tick: int, until: int) -> int:
    """The last tick of the schedule at or before ``until``, from ``tick`` on (within ``end``)."""
    expression = expressions.parse(row.expression)
    bound = until if row.end_at is None else min(until, row.end_at)
    return expression.latest(tick, bound, expressions.zone(row.timezone), row.anchor_at)


def send_time(tick: int | None, window: int) -> int | None:
    """When ``tick`` is sent: at once, or at a random time within the flexible window after it."""
    if tick is None or window == 0:
        return tick
    return tick + random.randrange(window * 1000)


def narrowed(row: ScheduleRow) -> int | None:
    """The pending tick's send time under ``row``'s (changed) flexible window: the one drawn if it is
    within it, else one drawn anew (a window made narrower applies to the pending tick too)."""
    if row.next_fire_at is None or row.send_at is None:
        return row.send_at
    if row.send_at < row.next_fire_at + max(row.flexible_window * 1000, 1):
        return row.send_at
    return send_time(row.next_fire_at, row.flexible_window)


def current_tick(row: ScheduleRow, now: int) -> int | None:
    """The tick a schedule made or changed at ``now`` fires first: the first from the current second
    on (a new rate's anchor is now, on a whole second: its first tick is at once), and after the last
    tick sent (a change or a resume in the second of a tick sent does not send it again)."""
    last = -1 if row.last_fire_at is None else row.last_fire_at
    return next_tick(row, max(now - 1000, row.anchor_at - 1, last))


def scheduled(row: ScheduleRow, now: int) -> ScheduleRow:
    """``row`` with its next tick counted afresh from ``now`` (a new or changed schedule, or one
    resumed: the ticks of a pause are not caught up)."""
    tick = current_tick(row, now) if row.enabled else None
    return replace(row, next_fire_at=tick, send_at=send_time(tick, row.flexible_window))
