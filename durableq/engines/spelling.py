"""SQLite's statements in PostgreSQL's SQL: the operations write each statement once, in SQLite's
spelling (see :mod:`.sql`); :func:`spell` turns it into PostgreSQL's once (cached): the parameter
style, and the fragments of :mod:`.sql` that differ."""

from __future__ import annotations

import re
from functools import lru_cache

from . import sql

_PARAM = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|::|:([A-Za-z_]\w*)|\?|%", re.S)

#: The fragments of :mod:`.sql` (SQLite's spelling) and PostgreSQL's spelling of each.
_SPELLINGS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(re.escape(sql.in_ids(":P")).replace(":P", r":(\w+)")),
        r"(SELECT CAST(value AS bigint) FROM json_array_elements_text(CAST(:\1 AS json)))",
    ),
    (
        re.compile(re.escape(sql.in_texts(":P")).replace(":P", r":(\w+)")),
        r"(SELECT value FROM json_array_elements_text(CAST(:\1 AS json)))",
    ),
    (re.compile(re.escape(sql.SKIP_LOCKED)), "FOR UPDATE SKIP LOCKED"),
    (
        re.compile(re.escape(sql.NEW_HANDLE)),
        f"format('%s.%s.%s.%s', queue_id, id, secret, {sql.RANDOM_HEX_PG})",
    ),
    (
        re.compile(re.escape(sql.catalog_bump(7)).replace("7", r"(\d+)")),
        r"UPDATE durableq_catalog SET version = \1",
    ),
    (re.compile(re.escape(sql.CATALOG_VERSION)), "SELECT version FROM durableq_catalog"),
    (re.compile(re.escape(sql.byte_length("X")).replace("X", r"(\w+)")), r"octet_length(\1)"),
    # SQLite's planner hint (PostgreSQL plans on its own).
    (re.compile(r"\bINDEXED BY \w+"), ""),
]


def spell_fragments(statement: str) -> str:
    """``statement`` (SQLite's SQL) with PostgreSQL's spelling of the fragments of :mod:`.sql`, and
    nothing else changed (for SQL handed to another driver: Spark's JDBC reads)."""
    for pattern, replacement in _SPELLINGS:
        statement = pattern.sub(replacement, statement)
    return statement


@lru_cache(maxsize=1024)
def spell(statement: str) -> str:
    """``statement`` (SQLite's SQL, ``:name`` or ``?`` parameters) in PostgreSQL's SQL for psycopg."""
    statement = spell_fragments(statement)

    def placeholder(match: re.Match[str]) -> str:
        token = match.group(0)
        if match.group(1) is not None:
            return f"%({match.group(1)})s"
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return token.replace("%", "%%")  # a string literal, a comment or a cast, as it is

    return _PARAM.sub(placeholder, statement)
