"""What the database holds, read outside the library: a SQLite file with raw sqlite3 in
read-only mode, a PostgreSQL database (a ``postgresql://`` URL) with a plain psycopg connection
in read-only transactions.

The checker compares the journals with these rows rather than with what the
library says, so a library bug cannot hide itself; ``stats()`` is then
compared with the same rows.  The statements are written once, in the SQL both
engines share with sqlite3's parameters; on PostgreSQL they run with psycopg's
(:func:`durableq.engines.postgres.connection.placeholders`).
"""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from durableq.engines.urls import postgres_url

#: Where a run's data lives: a SQLite file's path, or a PostgreSQL URL.
Location = str | Path

# queue_metrics columns, in the order the checker reports them.
COUNTER_COLUMNS = ("sent", "received", "deleted", "moved_to_dead_letter", "expired", "empty_receives")


#: The files of one database in WAL mode.
SUFFIXES = ("", "-wal", "-shm")


def copy_database(source: Path, target: Path) -> None:
    """Copy the database file with its WAL and shared-memory index, as they are now."""
    for suffix in SUFFIXES:
        part = source.with_name(source.name + suffix)
        if part.exists():
            shutil.copyfile(part, target.with_name(target.name + suffix))


def on_postgres(location: Location) -> bool:
    """Does ``location`` name a PostgreSQL database (rather than a SQLite file)?"""
    return isinstance(location, str) and postgres_url(location)


class Reader(Protocol):
    """What the functions here use of a connection: sqlite3's ``execute`` (SQLite's SQL) and ``close``."""

    def execute(self, statement: str, params: Any = ..., /) -> Any: ...

    def close(self) -> None: ...


class _Spelled:
    """A psycopg connection whose ``execute`` takes sqlite3's parameters (``?`` or ``:name``)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, statement: str, params: Any = ()) -> Any:
        from durableq.engines.postgres.connection import placeholders

        return self.raw.execute(placeholders(statement), params)

    def close(self) -> None:
        self.raw.close()


def connect_read_only(location: Location) -> Reader:
    if on_postgres(location):
        import psycopg

        # Autocommit: each statement is its own transaction, read-only like SQLite's mode=ro.
        raw = psycopg.connect(
            str(location),
            autocommit=True,
            connect_timeout=30,
            # durableq's schema (the default) first, where its tables are, and public (older revisions).
            options="-c default_transaction_read_only=on -c search_path=durableq,public",
        )
        return _Spelled(raw)
    return sqlite3.connect(f"file:{location}?mode=ro", uri=True, timeout=30)


@contextmanager
def reading(location: Location) -> Iterator[Reader]:
    """A read-only connection, closed afterwards (``with sqlite3.connect()`` would only commit)."""
    conn = connect_read_only(location)
    try:
        yield conn
    finally:
        conn.close()


#: PostgreSQL has no counterpart of ``PRAGMA integrity_check`` (amcheck is an extension, not
#: installed in these databases).  There, a trivial consistency query stands in: it reads every
#: message, event and counter row and finds none whose queue is gone (each goes with its queue).
_ORPHANS = (
    "SELECT (SELECT count(*) FROM durableq_messages WHERE queue_id NOT IN (SELECT id FROM durableq_queues)), "
    "(SELECT count(*) FROM durableq_message_events WHERE queue_id NOT IN (SELECT id FROM durableq_queues)), "
    "(SELECT count(*) FROM durableq_queue_metrics WHERE queue_id NOT IN (SELECT id FROM durableq_queues))"
)


def integrity(location: Location, *, writable: bool = False) -> str:
    """``PRAGMA integrity_check``'s verdict: ``"ok"`` or the problems it found (on PostgreSQL: the
    verdict of the consistency query above).

    ``writable`` opens the file as a process after a crash would: free to
    recover the WAL into a fresh shared-memory index (SQLite only).
    """
    if on_postgres(location):
        with reading(location) as reader:
            found = reader.execute(_ORPHANS).fetchone()
        kinds = ("message", "event", "counter")
        orphans = [f"{n} {kind} rows of no queue" for n, kind in zip(found, kinds) if n]
        return "; ".join(orphans) or "ok"
    conn = sqlite3.connect(location, timeout=30) if writable else connect_read_only(location)
    try:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


@dataclass(frozen=True, slots=True)
class Row:
    queue: str
    message_id: str
    body: str
    receive_count: int
    group: str | None
    sequence: int | None
    dead_letter_source: str | None


def _prefix(conn: Reader) -> str:
    """The names' prefix of the database's revision: ``durableq_`` from 0009, none before (a file a
    migration run left below it)."""
    try:
        conn.execute("SELECT 1 FROM durableq_messages WHERE 0 = 1").fetchall()
    except Exception:  # noqa: BLE001 - no such table: a file of an older revision (SQLite only)
        return ""
    return "durableq_"


def rows(location: Location) -> list[Row]:
    """Every message row of the database, with its queue's name."""
    with reading(location) as conn:
        prefix = _prefix(conn)
        return [
            Row(*row)
            for row in conn.execute(
                "SELECT q.name, m.message_id, m.body, m.receive_count, m.group_id, m.sequence, "
                f"m.dead_letter_source FROM {prefix}messages m JOIN {prefix}queues q ON q.id = m.queue_id"
            )
        ]


@dataclass(frozen=True, slots=True)
class Event:
    queue: str
    event: str
    message_id: str
    receive_count: int


def queues_with_history(location: Location) -> set[str]:
    with reading(location) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM durableq_queues WHERE history")}


def events(location: Location) -> list[Event]:
    """Every message event of the database (message history), oldest first, with its queue's name."""
    with reading(location) as conn:
        return [
            Event(*row)
            for row in conn.execute(
                "SELECT q.name, e.event, e.message_id, e.receive_count FROM durableq_message_events e "
                "JOIN durableq_queues q ON q.id = e.queue_id ORDER BY e.event_id"
            )
        ]


def counters(location: Location) -> dict[str, Counter[str]]:
    """The per-minute counters of every queue, summed over all minutes."""
    totals: dict[str, Counter[str]] = {}
    with reading(location) as conn:
        sums = ", ".join(f"sum(m.{c})" for c in COUNTER_COLUMNS)
        query = (
            f"SELECT q.name, {sums} FROM durableq_queues q "
            "LEFT JOIN durableq_queue_metrics m ON m.queue_id = q.id "
            "GROUP BY q.name"
        )
        for name, *values in conn.execute(query):
            # int(): PostgreSQL's sum() of bigints is numeric.
            totals[name] = Counter({c: int(v or 0) for c, v in zip(COUNTER_COLUMNS, values)})
    return totals


def revision(location: Location) -> str | None:
    from durableq.engines.fileformat import LEGACY_VERSION_TABLE, VERSION_TABLE

    with reading(location) as conn:
        try:
            row = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
        except Exception:  # noqa: BLE001 - below revision 0009, left there by a downgrade
            row = conn.execute(f"SELECT version_num FROM {LEGACY_VERSION_TABLE}").fetchone()
    return None if row is None else row[0]


def columns(location: Location, table: str) -> list[str]:
    with reading(location) as conn:
        if on_postgres(location):
            query = (
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema IN ('durableq', 'public') AND table_name = ? ORDER BY ordinal_position"
            )
            return [name for (name,) in conn.execute(query, (table,))]
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
