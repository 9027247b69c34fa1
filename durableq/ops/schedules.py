"""The rows of schedules (``durableq_schedules``): written, read, and a tick claimed.

What a schedule means (its expression, its next tick) is ``durableq/schedules/``'s; this module only
stores it.  Every change and every claimed tick adds one to the row's ``version``, and each is an
UPDATE guarded by the version its caller read: of several schedulers (or a scheduler and an
``update_schedule``) reading the same row, one UPDATE matches and the others match nothing, so a tick
is claimed once, and a claim never applies to a schedule changed since it was read.  A claim is
guarded on the whole row as read, not the version alone: a schedule deleted and made again (at version
0, perhaps in the same millisecond) between a round's read and its claim is another row, and its tick
is not claimed as the old one's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..engines.base import Connection
from ..errors import InvalidParameterValue, Reason, ResourceNotFoundException

_COLUMNS = (
    "name, queue, expression, body, attributes, timezone, start_at, end_at, flexible_window, catch_up, "
    "enabled, anchor_at, next_fire_at, send_at, last_fire_at, version, created_at, updated_at"
)
_SELECT = f"SELECT {_COLUMNS} FROM durableq_schedules"
_INSERT = (
    f"INSERT INTO durableq_schedules ({_COLUMNS}) VALUES (:name, :queue, :expression, :body, :attributes, "
    ":timezone, :start_at, :end_at, :flexible_window, :catch_up, :enabled, :anchor_at, :next_fire_at, "
    ":send_at, :last_fire_at, :version, :created_at, :updated_at)"
)
_UPDATE = (
    "UPDATE durableq_schedules SET queue = :queue, expression = :expression, body = :body, "
    "attributes = :attributes, timezone = :timezone, start_at = :start_at, end_at = :end_at, "
    "flexible_window = :flexible_window, catch_up = :catch_up, enabled = :enabled, anchor_at = :anchor_at, "
    "next_fire_at = :next_fire_at, send_at = :send_at, last_fire_at = :last_fire_at, "
    "version = :version + 1, updated_at = :updated_at WHERE name = :name AND version = :version"
)
_CLAIM = (
    "UPDATE durableq_schedules SET next_fire_at = :next_fire_at, send_at = :send_at, "
    "last_fire_at = COALESCE(:last_fire_at, last_fire_at), version = version + 1 "
    "WHERE name = :name AND version = :version AND created_at = :created_at AND updated_at = :updated_at "
    "AND queue = :queue AND expression = :expression AND body = :body AND timezone = :timezone "
    "AND anchor_at = :anchor_at AND flexible_window = :flexible_window AND catch_up = :catch_up "
    "AND next_fire_at = :read_next_fire_at AND send_at = :read_send_at "
    "AND COALESCE(attributes, '') = COALESCE(:attributes, '') "
    "AND COALESCE(start_at, -1) = COALESCE(:start_at, -1) AND COALESCE(end_at, -1) = COALESCE(:end_at, -1)"
)
#: Due rows: enabled, with a tick whose send time has come (the index ix_schedules_due).
_DUE = f"{_SELECT} WHERE enabled = TRUE AND send_at <= :now ORDER BY send_at LIMIT :limit"
_NEXT_DUE = "SELECT MIN(send_at) FROM durableq_schedules WHERE enabled = TRUE AND send_at IS NOT NULL"


@dataclass(frozen=True)
class ScheduleRow:
    """One stored schedule, as its columns hold it (times in epoch milliseconds)."""

    name: str
    queue: str
    expression: str
    body: str
    attributes: str | None
    timezone: str
    start_at: int | None
    end_at: int | None
    flexible_window: int
    catch_up: str
    enabled: bool
    anchor_at: int
    next_fire_at: int | None
    send_at: int | None
    last_fire_at: int | None
    version: int
    created_at: int
    updated_at: int

    def values(self) -> dict[str, object]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


def _row(values: tuple[object, ...]) -> ScheduleRow:
    row = ScheduleRow(*values)  # type: ignore[arg-type]
    return row if isinstance(row.enabled, bool) else _with(row, enabled=bool(row.enabled))


def _with(row: ScheduleRow, **changes: object) -> ScheduleRow:
    return ScheduleRow(**{**row.values(), **changes})  # type: ignore[arg-type]


def not_found(name: str) -> ResourceNotFoundException:
    return ResourceNotFoundException(
        template="there is no schedule named {value!r} (broker.list_schedules() lists them)",
        parameter="name",
        value=name,
        reason=Reason.NOT_FOUND,
    )


def find(conn: Connection, name: str) -> ScheduleRow | None:
    found = conn.execute(f"{_SELECT} WHERE name = :name", {"name": name}).fetchone()
    return None if found is None else _row(tuple(found))


def get(conn: Connection, name: str) -> ScheduleRow:
    """The schedule called ``name``; ResourceNotFoundException if there is none."""
    row = find(conn, name)
    if row is None:
        raise not_found(name)
    return row


def insert(conn: Connection, row: ScheduleRow) -> None:
    conn.execute(_INSERT, row.values())


def update(conn: Connection, row: ScheduleRow) -> None:
    """Write ``row`` over the stored one of its version (which it must still be: a tick claimed or a
    change made since raises, and the caller reads again)."""
    if conn.execute(_UPDATE, row.values()).rowcount != 1:
        raise InvalidParameterValue(
            template="the schedule {value!r} changed (or was deleted) while this call changed it; try again",
            parameter="name",
            value=row.name,
            reason=Reason.CONFLICT,
        )


def delete(conn: Connection, name: str) -> None:
    if conn.execute("DELETE FROM durableq_schedules WHERE name = :name", {"name": name}).rowcount != 1:
        raise not_found(name)


def names(conn: Connection, prefix: str, limit: int) -> list[ScheduleRow]:
    """Schedules whose name starts with ``prefix``, by name."""
    rows = conn.execute(
        f"{_SELECT} WHERE substr(name, 1, :length) = :prefix ORDER BY name LIMIT :limit",
        {"length": len(prefix), "prefix": prefix, "limit": limit},
    )
    return [_row(tuple(values)) for values in rows]


def due(conn: Connection, now: int, limit: int) -> list[ScheduleRow]:
    """Enabled schedules whose next tick's send time is at or before ``now``, soonest first."""
    return [_row(tuple(values)) for values in conn.execute(_DUE, {"now": now, "limit": limit})]


def next_due(conn: Connection) -> int | None:
    """The soonest send time of an enabled schedule (None: no tick is waiting)."""
    (soonest,) = conn.execute(_NEXT_DUE).fetchone()
    return None if soonest is None else int(soonest)


def claim(
    conn: Connection,
    row: ScheduleRow,
    next_fire_at: int | None,
    send_at: int | None,
    last_fire_at: int | None,
) -> bool:
    """Move ``row``'s schedule on to its next tick, if it is still the row read (every column, not only
    the version: see the module): True for the one caller whose claim matched (it then sends the tick,
    in the same transaction)."""
    params = {
        **row.values(),
        "read_next_fire_at": row.next_fire_at,
        "read_send_at": row.send_at,
        "next_fire_at": next_fire_at,
        "send_at": send_at,
        "last_fire_at": last_fire_at,
    }
    return bool(conn.execute(_CLAIM, params).rowcount == 1)
