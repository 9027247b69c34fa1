"""Queue rows: the row every operation reads, its cache, listing and tags.

Checking settings and writing them is ``settings.py``'s concept.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .. import limits, validation
from ..engines.base import Connection
from ..errors import InvalidParameterValue, QueueDoesNotExist, Reason
from ..types import RedriveAllowPolicy, RedrivePolicy


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A queue row as every operation reads it, inside its own transaction: the columns of the
    queue settings (``durableq/queue_settings.py``; a test keeps the two equal) and the row's own."""

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
    policy: str | None
    kms_master_key_id: str | None
    kms_data_key_reuse_period: int
    sqs_managed_sse_enabled: bool
    fifo_throughput_limit: str | None
    history: bool
    history_retention: int
    idle_timeout: int | None  # seconds; set only on temporary queues
    large_payloads: bool  # messages over maximum_message_size go to the payload store
    sealed: bool  # encryption was on at some time: the queue may hold encrypted rows
    grouped: bool  # a standard queue that was sent a group id at some time: receives are fair

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
# SQLite hands booleans back as 0 and 1.
_BOOLEANS = [f.name for f in fields(QueueConfig) if f.type == "bool"]
_COLUMNS = ", ".join(_FIELDS)
_SELECT_BY_NAME = f"SELECT {_COLUMNS} FROM durableq_queues WHERE name = ?"


class Catalog:
    """A broker's cache of queue rows, so the hot paths need no lookup statement.

    A counter (the dialect's ``catalog_version``) counts changes to queue rows (every
    create, set and delete bumps it in its own transaction).  Paths inside a write
    transaction ask for ``fresh`` rows, checked against that counter and the one flag
    the queue's own writes set without bumping it (``grouped``: see ``fairness.mark``),
    in one statement (the dialect's ``catalog_check``).  The one-statement paths
    (standard send, receive, delete) take the cached row unchecked for up to
    :data:`REVALIDATE_EVERY` seconds: their SQL reads every setting that matters from
    the live row and fails safe (no row matched) when the queue is gone, and they
    re-check the catalog whenever that happens.
    """

    REVALIDATE_EVERY = 1.0

    def __init__(self) -> None:
        self._cached: dict[str, tuple[int, float, QueueConfig]] = {}
        #: Per connection: name -> (its ``mark``, how many changes to queue rows it had made, the row it
        #: found live) at the last check of that queue's cached row on it (see :meth:`get`).
        self._checked: weakref.WeakKeyDictionary[Connection, dict[str, tuple[int, int, QueueConfig]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(
        self, conn: Connection, name: str, *, fresh: bool = False, mark: int | None = None
    ) -> QueueConfig:
        """The queue called ``name``, or QueueDoesNotExist.

        ``mark``: the value of the engine's ``commits_elsewhere`` read on ``conn`` in this transaction
        (a broker's own connection, weakly referable).  A FIFO queue's cached row checked on ``conn`` at
        the same mark, with no change to queue rows made on ``conn`` since (:func:`changed`), is the
        live row: no other connection committed, and this one changed no queue row (a FIFO queue's
        writes set no flag of its row: ``grouped`` is a standard queue's).  So it is taken unchecked
        (issue 30: a statement of every FIFO receive), if it is still the row that check found: another
        thread's ``get`` that read the row before this connection changed it may cache that older row
        after this connection's check."""
        entry = self._cached.get(name)
        now = time.monotonic()
        if entry is not None and not fresh and now - entry[1] < self.REVALIDATE_EVERY:
            return entry[2]
        if mark is not None and entry is not None and entry[2].fifo:
            seen = self._checked.get(conn)
            checked = None if seen is None else seen.get(name)
            if (
                checked is not None
                and checked[2] is entry[2]  # the row checked, not one cached since
                and checked[:2] == (mark, _own_changes.get(conn, 0))
            ):
                return entry[2]
        version, grouped = conn.execute(conn.dialect.catalog_check, (name,)).fetchone()
        if (
            entry is not None
            and entry[0] == version
            and grouped is not None
            and bool(grouped) == entry[2].grouped
        ):
            queue = entry[2]
        else:
            self._cached.pop(name, None)
            queue = load(conn, name)
        self._cached[name] = (version, now, queue)
        if mark is not None:
            self._checked.setdefault(conn, {})[name] = (mark, _own_changes.get(conn, 0), queue)
        return queue

    def cached(self, name: str) -> QueueConfig | None:
        """The row cached for ``name``, however old (None if none): a hint only, never checked."""
        entry = self._cached.get(name)
        return None if entry is None else entry[2]

    def forget(self, name: str) -> None:
        """Drop a cached row (after this broker changed it, or a statement found it stale)."""
        self._cached.pop(name, None)


#: Per connection: how many changes to queue rows it has made (:func:`changed`), which its own
#: ``commits_elsewhere`` does not show (see :meth:`Catalog.get`).
_own_changes: weakref.WeakKeyDictionary[Connection, int] = weakref.WeakKeyDictionary()


def changed(conn: Connection) -> None:
    """Tell every broker's catalog that queue rows changed (call inside the write)."""
    (version,) = conn.execute(conn.dialect.catalog_version).fetchone()
    conn.execute(conn.dialect.catalog_bump((version + 1) & 0x7FFFFFFF))
    try:
        _own_changes[conn] = _own_changes.get(conn, 0) + 1
    except TypeError:  # not weakly referable (an application's connection): never given a mark
        pass


def find(conn: Connection, name: str) -> QueueConfig | None:
    row = conn.execute(_SELECT_BY_NAME, (name,)).fetchone()
    return None if row is None else _config(row)


def _config(row: tuple[Any, ...]) -> QueueConfig:
    values = dict(zip(_FIELDS, row))
    for name in _BOOLEANS:
        values[name] = bool(values[name])
    return QueueConfig(**values)


def load(conn: Connection, name: str) -> QueueConfig:
    """The queue called ``name``, or QueueDoesNotExist."""
    row = conn.execute(_SELECT_BY_NAME, (name,)).fetchone()
    if row is None:
        raise QueueDoesNotExist(f"queue {name!r} does not exist")
    return _config(row)


def list_names(conn: Connection, prefix: str) -> list[str]:
    validation.text("prefix", prefix)
    # Compare a prefix slice rather than LIKE, so '_' and '%' in the prefix mean themselves.
    rows = conn.execute(
        "SELECT name FROM durableq_queues WHERE substr(name, 1, ?) = ? ORDER BY name", (len(prefix), prefix)
    )
    return [name for (name,) in rows]


# -- tags ------------------------------------------------------------------


def get_tags(conn: Connection, queue: QueueConfig) -> dict[str, str]:
    rows = conn.execute("SELECT key, value FROM durableq_tags WHERE queue_id = ? ORDER BY key", (queue.id,))
    return dict(rows.fetchall())


def set_tags(conn: Connection, queue: QueueConfig, new_tags: Mapping[str, str]) -> None:
    checked = validation.tags(new_tags)
    merged = {**get_tags(conn, queue), **checked}
    if len(merged) > limits.MAX_TAGS:
        raise InvalidParameterValue(
            template="a queue holds at most {high} tags; this would make {value}",
            parameter="tags",
            value=len(merged),
            high=limits.MAX_TAGS,
            queue=queue.name,
            reason=Reason.TOO_MANY,
        )
    conn.executemany(
        "INSERT INTO durableq_tags (queue_id, key, value) VALUES (?, ?, ?) "
        "ON CONFLICT (queue_id, key) DO UPDATE SET value = excluded.value",
        [(queue.id, k, v) for k, v in checked.items()],
    )


def remove_tags(conn: Connection, queue: QueueConfig, keys: tuple[str, ...]) -> None:
    for key in keys:
        validation.text("tag key", key)
    conn.executemany(
        "DELETE FROM durableq_tags WHERE queue_id = ? AND key = ?", [(queue.id, k) for k in keys]
    )


def dead_letter_sources(conn: Connection, name: str) -> list[str]:
    """Queues whose redrive policy names ``name``."""
    rows = conn.execute("SELECT name FROM durableq_queues WHERE dead_letter_queue = ? ORDER BY name", (name,))
    return [n for (n,) in rows]
