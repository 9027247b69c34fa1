"""Queue rows: settings, creation, lookup, listing, deletion, purge and tags."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from . import limits, validation
from .errors import (
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
    QueueDoesNotExist,
    QueueNameExists,
)
from .types import RedriveAllowPolicy, RedrivePolicy, datetime_from_ms


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A queue row as every operation reads it, inside its own transaction."""

    id: int
    name: str
    fifo: bool
    visibility_timeout: int
    delay_seconds: int
    retention_period: int
    receive_wait_time: int
    maximum_message_size: int
    content_based_deduplication: bool
    deduplication_scope: str
    dead_letter_queue: str | None
    max_receive_count: int | None
    redrive_permission: str | None
    redrive_source_queues: str | None
    created_at: int
    last_modified: int

    @property
    def in_flight_limit(self) -> int:
        return limits.MAX_IN_FLIGHT_FIFO if self.fifo else limits.MAX_IN_FLIGHT_STANDARD

    @property
    def redrive_policy(self) -> RedrivePolicy | None:
        if self.dead_letter_queue is None or self.max_receive_count is None:
            return None
        return RedrivePolicy(self.dead_letter_queue, self.max_receive_count)

    @property
    def redrive_allow_policy(self) -> RedriveAllowPolicy | None:
        if self.redrive_permission is None:
            return None
        sources = json.loads(self.redrive_source_queues) if self.redrive_source_queues else []
        return RedriveAllowPolicy(self.redrive_permission, tuple(sources))


_FIELDS = [f.name for f in fields(QueueConfig)]
_COLUMNS = ", ".join(_FIELDS)
_SELECT_BY_NAME = f"SELECT {_COLUMNS} FROM queues WHERE name = ?"

# Settings with a plain integer range: name -> (low, high, unit).
_RANGES: dict[str, tuple[int, int, str]] = {
    "visibility_timeout": (0, limits.MAX_VISIBILITY_TIMEOUT, "seconds"),
    "delay_seconds": (0, limits.MAX_DELAY_SECONDS, "seconds"),
    "retention_period": (limits.MIN_RETENTION_PERIOD, limits.MAX_RETENTION_PERIOD, "seconds"),
    "receive_wait_time": (0, limits.MAX_RECEIVE_WAIT_TIME, "seconds"),
    "maximum_message_size": (limits.MIN_MAXIMUM_MESSAGE_SIZE, limits.MAX_MAXIMUM_MESSAGE_SIZE, "bytes"),
}
_FIFO_ONLY = ("content_based_deduplication", "deduplication_scope")
SETTABLE = (*_RANGES, *_FIFO_ONLY, "redrive_policy", "redrive_allow_policy")
# The columns that make two create_queue calls "the same queue".
_IDENTITY = (
    "fifo",
    *_RANGES,
    *_FIFO_ONLY,
    "dead_letter_queue",
    "max_receive_count",
    "redrive_permission",
    "redrive_source_queues",
)


class Catalog:
    """A broker's cache of queue rows, so the hot paths need no lookup statement.

    ``PRAGMA user_version`` counts changes to queue rows (every create, set
    and delete bumps it in its own transaction).  Paths inside a write
    transaction ask for ``fresh`` rows, checked against that counter.  The
    one-statement paths (standard send, receive, delete) take the cached row
    unchecked for up to :data:`REVALIDATE_EVERY` seconds: their SQL reads every
    setting that matters from the live row and fails safe (no row matched) when
    the queue is gone, and they re-check the catalog whenever that happens.
    """

    REVALIDATE_EVERY = 1.0

    def __init__(self) -> None:
        self._cached: dict[str, tuple[int, float, QueueConfig]] = {}

    def get(self, conn: sqlite3.Connection, name: str, *, fresh: bool = False) -> QueueConfig:
        """The queue called ``name``, or QueueDoesNotExist."""
        entry = self._cached.get(name)
        now = time.monotonic()
        if entry is not None and not fresh and now - entry[1] < self.REVALIDATE_EVERY:
            return entry[2]
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if entry is not None and entry[0] == version:
            queue = entry[2]
        else:
            self._cached.pop(name, None)
            queue = load(conn, name)
        self._cached[name] = (version, now, queue)
        return queue

    def forget(self, name: str) -> None:
        """Drop a cached row (after this broker changed it, or a statement found it stale)."""
        self._cached.pop(name, None)


def _changed(conn: sqlite3.Connection) -> None:
    """Tell every broker's catalog that queue rows changed (call inside the write)."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    conn.execute(f"PRAGMA user_version = {(version + 1) & 0x7FFFFFFF}")


def find(conn: sqlite3.Connection, name: str) -> QueueConfig | None:
    row = conn.execute(_SELECT_BY_NAME, (name,)).fetchone()
    return None if row is None else _config(row)


def _config(row: tuple[Any, ...]) -> QueueConfig:
    values = dict(zip(_FIELDS, row))
    # SQLite hands booleans back as 0 and 1.
    values["fifo"] = bool(values["fifo"])
    values["content_based_deduplication"] = bool(values["content_based_deduplication"])
    return QueueConfig(**values)


def load(conn: sqlite3.Connection, name: str) -> QueueConfig:
    """The queue called ``name``, or QueueDoesNotExist."""
    row = conn.execute(_SELECT_BY_NAME, (name,)).fetchone()
    if row is None:
        raise QueueDoesNotExist(f"queue {name!r} does not exist")
    return _config(row)


def settings_to_columns(fifo: bool, settings: Mapping[str, Any], conn: sqlite3.Connection, name: str) -> dict[str, Any]:
    """Check queue settings (create or set) and return the column values they mean."""
    columns: dict[str, Any] = {}
    for key, value in settings.items():
        if key in _RANGES:
            low, high, unit = _RANGES[key]
            columns[key] = validation.integer(key, value, low, high, unit, InvalidAttributeValue)
        elif key in _FIFO_ONLY:
            if not fifo:
                raise InvalidAttributeName(f"{key} applies to FIFO queues only; {name!r} is a standard queue")
            if key == "content_based_deduplication":
                if not isinstance(value, bool):
                    raise InvalidAttributeValue(f"content_based_deduplication must be True or False; got {value!r}")
                columns[key] = value
            else:
                columns[key] = validation.choice(key, value, limits.DEDUPLICATION_SCOPES, InvalidAttributeValue)
        elif key == "redrive_policy":
            columns.update(_redrive_columns(conn, name, fifo, value))
        elif key == "redrive_allow_policy":
            columns.update(_allow_columns(value))
        elif key == "fifo":
            raise InvalidAttributeName(f"a queue's type never changes after creation ({name!r})")
        else:
            raise InvalidAttributeName(
                f"{key!r} is not a queue attribute; settable are {', '.join(SETTABLE)}"
            )
    return columns


def _redrive_columns(conn: sqlite3.Connection, name: str, fifo: bool, policy: object) -> dict[str, Any]:
    if policy is None:
        return {"dead_letter_queue": None, "max_receive_count": None}
    if not isinstance(policy, RedrivePolicy):
        raise InvalidAttributeValue(
            f"redrive_policy must be a durableq.RedrivePolicy or None; got {type(policy).__name__}"
        )
    count = validation.integer(
        "max_receive_count",
        policy.max_receive_count,
        limits.MIN_MAX_RECEIVE_COUNT,
        limits.MAX_MAX_RECEIVE_COUNT,
        "receives",
        InvalidAttributeValue,
    )
    target_name = policy.dead_letter_queue
    if not isinstance(target_name, str) or target_name == name:
        raise InvalidAttributeValue(f"queue {name!r} cannot be its own dead-letter queue")
    target = find(conn, target_name)
    if target is None:
        raise InvalidAttributeValue(f"dead-letter queue {target_name!r} does not exist; create it first")
    if target.fifo != fifo:
        kind = "FIFO" if fifo else "standard"
        raise InvalidAttributeValue(
            f"the dead-letter queue of a {kind} queue must be {kind} too; {target_name!r} is not"
        )
    allow = target.redrive_allow_policy
    if allow is not None and (
        allow.permission == "denyAll" or (allow.permission == "byQueue" and name not in allow.source_queues)
    ):
        raise InvalidAttributeValue(
            f"the redrive-allow policy of {target_name!r} ({allow.permission}) does not let "
            f"{name!r} use it as a dead-letter queue"
        )
    return {"dead_letter_queue": target_name, "max_receive_count": count}


def _allow_columns(policy: object) -> dict[str, Any]:
    if policy is None:
        return {"redrive_permission": None, "redrive_source_queues": None}
    if not isinstance(policy, RedriveAllowPolicy):
        raise InvalidAttributeValue(
            f"redrive_allow_policy must be a durableq.RedriveAllowPolicy or None; got {type(policy).__name__}"
        )
    permission = validation.choice(
        "redrive_allow_policy permission", policy.permission, limits.REDRIVE_PERMISSIONS, InvalidAttributeValue
    )
    sources = validation.names("source_queues", policy.source_queues)
    if permission == "byQueue":
        if not 1 <= len(sources) <= limits.MAX_REDRIVE_SOURCE_QUEUES:
            raise InvalidAttributeValue(
                f"permission byQueue needs 1 to {limits.MAX_REDRIVE_SOURCE_QUEUES} source queues; got {len(sources)}"
            )
    elif sources:
        raise InvalidAttributeValue(f"source_queues are only allowed with permission byQueue, not {permission}")
    return {
        "redrive_permission": permission,
        "redrive_source_queues": json.dumps(sorted(set(sources))) if sources else None,
    }


def create(
    conn: sqlite3.Connection, name: str, fifo: bool, settings: Mapping[str, Any], now: int
) -> tuple[QueueConfig, bool]:
    """Create the queue, or return the existing identical one; the flag says if it is new."""
    columns = {
        "fifo": fifo,
        "content_based_deduplication": False,
        "deduplication_scope": limits.DEFAULT_DEDUPLICATION_SCOPE,
        **settings_to_columns(fifo, settings, conn, name),
    }
    existing = find(conn, name)
    if existing is not None:
        differing = [c for c in _IDENTITY if c in columns and getattr(existing, c) != columns[c]]
        if differing:
            raise QueueNameExists(
                f"queue {name!r} exists with other attributes ({', '.join(differing)}); "
                "use set_attributes to change them or another name"
            )
        return existing, False
    columns.update(name=name, created_at=now, last_modified=now)
    names = ", ".join(columns)
    placeholders = ", ".join(f":{c}" for c in columns)
    conn.execute(f"INSERT INTO queues ({names}) VALUES ({placeholders})", columns)
    _changed(conn)
    return load(conn, name), True


def update(conn: sqlite3.Connection, queue: QueueConfig, changes: Mapping[str, Any], now: int) -> None:
    columns = settings_to_columns(queue.fifo, changes, conn, queue.name)
    if not columns:
        return
    columns["last_modified"] = now
    assignments = ", ".join(f"{c} = :{c}" for c in columns)
    conn.execute(f"UPDATE queues SET {assignments} WHERE id = :id", {**columns, "id": queue.id})
    _changed(conn)


def attributes(queue: QueueConfig) -> dict[str, Any]:
    """The public view of a queue's settings (``Queue.attributes()``)."""
    result: dict[str, Any] = {
        "name": queue.name,
        "fifo": queue.fifo,
        **{key: getattr(queue, key) for key in _RANGES},
        "redrive_policy": queue.redrive_policy,
        "redrive_allow_policy": queue.redrive_allow_policy,
        "created_at": datetime_from_ms(queue.created_at),
        "last_modified": datetime_from_ms(queue.last_modified),
    }
    if queue.fifo:
        result["content_based_deduplication"] = queue.content_based_deduplication
        result["deduplication_scope"] = queue.deduplication_scope
    return result


def list_names(conn: sqlite3.Connection, prefix: str) -> list[str]:
    if not isinstance(prefix, str):
        raise InvalidParameterValue(f"prefix must be a str; got {type(prefix).__name__}")
    # Compare a prefix slice rather than LIKE, so '_' and '%' in the prefix mean themselves.
    rows = conn.execute(
        "SELECT name FROM queues WHERE substr(name, 1, ?) = ? ORDER BY name", (len(prefix), prefix)
    )
    return [name for (name,) in rows]


#: Tables whose rows belong to one queue and go when it is deleted.
_QUEUE_OWNED = ("messages", "tags", "queue_metrics", "fifo_groups", "fifo_deduplication", "receive_attempts")


def delete(conn: sqlite3.Connection, queue: QueueConfig) -> None:
    for table in _QUEUE_OWNED:
        conn.execute(f"DELETE FROM {table} WHERE queue_id = ?", (queue.id,))
    conn.execute("DELETE FROM queues WHERE id = ?", (queue.id,))
    _changed(conn)


def purge(conn: sqlite3.Connection, queue: QueueConfig) -> int:
    """Remove every message (and what FIFO remembers of them); returns how many."""
    removed = conn.execute("DELETE FROM messages WHERE queue_id = ?", (queue.id,)).rowcount
    for table in ("fifo_groups", "fifo_deduplication", "receive_attempts"):
        conn.execute(f"DELETE FROM {table} WHERE queue_id = ?", (queue.id,))
    return removed


# -- tags ------------------------------------------------------------------


def get_tags(conn: sqlite3.Connection, queue: QueueConfig) -> dict[str, str]:
    rows = conn.execute("SELECT key, value FROM tags WHERE queue_id = ? ORDER BY key", (queue.id,))
    return dict(rows.fetchall())


def set_tags(conn: sqlite3.Connection, queue: QueueConfig, new_tags: Mapping[str, str]) -> None:
    checked = validation.tags(new_tags)
    merged = {**get_tags(conn, queue), **checked}
    if len(merged) > limits.MAX_TAGS:
        raise InvalidParameterValue(f"a queue holds at most {limits.MAX_TAGS} tags; this would make {len(merged)}")
    conn.executemany(
        "INSERT INTO tags (queue_id, key, value) VALUES (?, ?, ?) "
        "ON CONFLICT (queue_id, key) DO UPDATE SET value = excluded.value",
        [(queue.id, k, v) for k, v in checked.items()],
    )


def remove_tags(conn: sqlite3.Connection, queue: QueueConfig, keys: tuple[str, ...]) -> None:
    for key in keys:
        if not isinstance(key, str):
            raise InvalidParameterValue(f"tag keys are strings; got {key!r}")
    conn.executemany("DELETE FROM tags WHERE queue_id = ? AND key = ?", [(queue.id, k) for k in keys])


def dead_letter_sources(conn: sqlite3.Connection, name: str) -> list[str]:
    """Queues whose redrive policy names ``name``."""
    rows = conn.execute("SELECT name FROM queues WHERE dead_letter_queue = ? ORDER BY name", (name,))
    return [n for (n,) in rows]
