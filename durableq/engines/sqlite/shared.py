"""durableq's tables made in a SQLite file that already holds an application's.

The revisions before 0009 made tables under names without the prefix (``queues``, ``messages``...),
which an application's tables may have: walking the revisions in its file would collide with them
(one file, one namespace).  So durableq's tables are made by the migrations in a new file of their
own, which holds nothing else, and copied into the application's file at head: each table, index
and trigger from its own SQL (so exactly what the migrations make), then their rows (the revision,
the database's identity), all in one transaction.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..fileformat import PREFIX
from .connection import BEGIN_WRITE

# Tables first, then what refers to them; SQLite's own objects (sqlite_sequence...) are SQLite's to make.
_OBJECTS = """
SELECT type, name, sql FROM fresh.sqlite_master
WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite%'
ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, rowid
"""


_TABLES = (
    f"SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, {len(PREFIX)}) = '{PREFIX}'"
)
_OTHERS = (
    f"SELECT count(*) FROM sqlite_master WHERE substr(name, 1, {len(PREFIX)}) != '{PREFIX}' "
    "AND name NOT LIKE 'sqlite%'"
)


def holds_other_objects(conn: sqlite3.Connection) -> bool:
    """Does the file hold anything yet (an application's tables, indexes, views or triggers)?"""
    (count,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return bool(count)


def drop_all(conn: sqlite3.Connection) -> bool:
    """Drop durableq's tables (their indexes and triggers with them), in one transaction, if the file
    holds anything else; False (nothing done) if not."""
    names = [row[0] for row in conn.execute(_TABLES)]
    (others,) = conn.execute(_OTHERS).fetchone()
    if not others:
        return False
    conn.execute(BEGIN_WRITE)
    try:
        for name in names:
            conn.execute(f"DROP TABLE {name}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def make_at_head(conn: sqlite3.Connection, migrate_new: Callable[[Path], None]) -> None:
    """durableq's tables, at head, made in ``conn``'s file beside the application's (see above);
    ``migrate_new(path)`` makes a new durableq file at head."""
    with tempfile.TemporaryDirectory(prefix="durableq-head-") as folder:
        fresh = Path(folder) / "head.db"
        migrate_new(fresh)
        conn.execute("ATTACH DATABASE ? AS fresh", (str(fresh),))
        try:
            conn.execute(BEGIN_WRITE)
            try:
                objects = conn.execute(_OBJECTS).fetchall()
                for _kind, _name, sql in objects:
                    conn.execute(sql)
                for kind, name, _sql in objects:
                    if kind == "table":
                        conn.execute(f"INSERT INTO main.{name} SELECT * FROM fresh.{name}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.execute("DETACH DATABASE fresh")
