"""What the database file holds, read with raw sqlite3 in read-only mode.

The checker compares the journals with these rows rather than with what the
library says, so a library bug cannot hide itself; ``stats()`` is then
compared with the same rows.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


def connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection, closed afterwards (``with sqlite3.connect()`` would only commit)."""
    conn = connect_read_only(path)
    try:
        yield conn
    finally:
        conn.close()


def integrity(path: Path, *, writable: bool = False) -> str:
    """``PRAGMA integrity_check``'s verdict: ``"ok"`` or the problems it found.

    ``writable`` opens the file as a process after a crash would: free to
    recover the WAL into a fresh shared-memory index.
    """
    conn = sqlite3.connect(path, timeout=30) if writable else connect_read_only(path)
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


def rows(path: Path) -> list[Row]:
    """Every message row of the file, with its queue's name."""
    with reading(path) as conn:
        return [
            Row(*row)
            for row in conn.execute(
                "SELECT q.name, m.message_id, m.body, m.receive_count, m.group_id, m.sequence, "
                "m.dead_letter_source FROM messages m JOIN queues q ON q.id = m.queue_id"
            )
        ]


@dataclass(frozen=True, slots=True)
class Event:
    queue: str
    event: str
    message_id: str
    receive_count: int


def queues_with_history(path: Path) -> set[str]:
    with reading(path) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM queues WHERE history")}


def events(path: Path) -> list[Event]:
    """Every message event of the file (message history), oldest first, with its queue's name."""
    with reading(path) as conn:
        return [
            Event(*row)
            for row in conn.execute(
                "SELECT q.name, e.event, e.message_id, e.receive_count FROM message_events e "
                "JOIN queues q ON q.id = e.queue_id ORDER BY e.event_id"
            )
        ]


def counters(path: Path) -> dict[str, Counter[str]]:
    """The per-minute counters of every queue, summed over all minutes."""
    totals: dict[str, Counter[str]] = {}
    with reading(path) as conn:
        sums = ", ".join(f"sum(m.{c})" for c in COUNTER_COLUMNS)
        query = (
            f"SELECT q.name, {sums} FROM queues q LEFT JOIN queue_metrics m ON m.queue_id = q.id "
            "GROUP BY q.name"
        )
        for name, *values in conn.execute(query):
            totals[name] = Counter({c: v or 0 for c, v in zip(COUNTER_COLUMNS, values)})
    return totals


def revision(path: Path) -> str | None:
    with reading(path) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if row is None else row[0]


def columns(path: Path, table: str) -> list[str]:
    with reading(path) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
