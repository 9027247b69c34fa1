"""The SQL that differs between the engines: each fragment written once per engine, side by side.

The operations write each statement once, in the SQL both engines share, and take every fragment that
differs from a :class:`Dialect`: the connection's (``conn.dialect``), or, for a statement built at
import, each of them through :func:`for_each_dialect` (a statement per dialect, looked up by
``conn.dialect`` when it runs).  Nothing rewrites one engine's SQL into the other's: a fragment used
without this module would be SQLite's alone, and fail on PostgreSQL at once.

Parameters are written ``:name`` or ``?`` (sqlite3's styles); the PostgreSQL connection turns them
into psycopg's ``%(name)s`` and ``%s`` (:func:`.postgres.connection.placeholders`: a mechanical
translation, not a fragment).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


class Dialect(ABC):
    """One engine's spelling of the fragments that differ (an instance per engine: :data:`SQLITE`,
    :data:`POSTGRES`).  Compared and hashed by identity."""

    #: The engine's name, as SQLAlchemy names its dialect.
    name: str
    #: The end of a claim's row picker: rows another transaction is claiming right now are passed
    #: over, not waited for.
    skip_locked: str
    #: The same for a row of which only non-key columns change (which an insert's foreign key check,
    #: FOR KEY SHARE, does not wait for).
    skip_locked_no_key: str
    #: 8 random bytes in hex (a new row's secret, a handle's nonce).
    random_hex: str
    #: A new receipt handle of a message row: queue id, row id, the row's secret, 8 random bytes in hex.
    new_handle: str
    #: The statement that reads the catalog's counter of changes to queue rows (see
    #: ``ops/queue_rows.Catalog``).
    catalog_version: str
    #: The catalog's check of a cached queue row: the counter, and the queue's ``grouped`` flag (the one
    #: setting its messages' writes set without bumping the counter: ``ops/fairness.py``) by name.
    catalog_check: str
    #: A statement whose value changes whenever another connection has committed, and never for this
    #: connection's own commits (what lets a connection remember a fact between its transactions); None
    #: where the engine has none.
    commits_elsewhere: str | None = None

    @abstractmethod
    def catalog_bump(self, version: int) -> str:
        """The statement that sets the catalog's counter to ``version``."""

    @abstractmethod
    def in_ids(self, param: str) -> str:
        """The set of row ids in parameter ``param``, bound to :func:`encode_ids` of a list."""

    @abstractmethod
    def in_texts(self, param: str) -> str:
        """The set of strings in parameter ``param``, bound to :func:`encode_ids` of a list."""

    @abstractmethod
    def byte_length(self, column: str) -> str:
        """The length in bytes (UTF-8) of the text ``column``."""

    @abstractmethod
    def indexed_by(self, index: str) -> str:
        """After a table's name: read it through ``index`` (a planner hint, where the engine takes one)."""

    def __repr__(self) -> str:
        return f"<Dialect {self.name}>"


class _Sqlite(Dialect):
    name = "sqlite"
    # One writer at a time: there is nothing to pass over, and the comment is all that remains.
    skip_locked = "/* FOR UPDATE SKIP LOCKED */"
    skip_locked_no_key = "/* FOR NO KEY UPDATE SKIP LOCKED */"
    random_hex = "lower(hex(randomblob(8)))"
    new_handle = f"printf('%d.%d.%s.%s', queue_id, id, secret, {random_hex})"
    catalog_version = "PRAGMA user_version"
    catalog_check = (
        "SELECT (SELECT user_version FROM pragma_user_version), "
        "(SELECT grouped FROM durableq_queues WHERE name = ?)"
    )
    commits_elsewhere = "PRAGMA data_version"

    def catalog_bump(self, version: int) -> str:
        return f"PRAGMA user_version = {int(version)}"

    def in_ids(self, param: str) -> str:
        return f"(SELECT value FROM json_each({param}))"

    def in_texts(self, param: str) -> str:
        return f"(SELECT CAST(value AS TEXT) FROM json_each({param}))"

    def byte_length(self, column: str) -> str:
        return f"length(CAST({column} AS BLOB))"

    def indexed_by(self, index: str) -> str:
        return f"INDEXED BY {index}"


class _Postgres(Dialect):
    name = "postgresql"
    skip_locked = "FOR UPDATE SKIP LOCKED"
    skip_locked_no_key = "FOR NO KEY UPDATE SKIP LOCKED"
    # The first 64 bits of the MD5 of a random UUID (gen_random_uuid draws from the operating system's
    # CSPRNG, and needs no extension since PostgreSQL 13).
    random_hex = "left(md5(CAST(gen_random_uuid() AS text)), 16)"
    new_handle = f"format('%s.%s.%s.%s', queue_id, id, secret, {random_hex})"
    # The schema's one-row table (SQLite keeps the counter in the file's header).
    catalog_version = "SELECT version FROM durableq_catalog"
    catalog_check = (
        "SELECT (SELECT version FROM durableq_catalog), (SELECT grouped FROM durableq_queues WHERE name = ?)"
    )

    def catalog_bump(self, version: int) -> str:
        return f"UPDATE durableq_catalog SET version = {int(version)}"

    def in_ids(self, param: str) -> str:
        return f"(SELECT CAST(value AS bigint) FROM json_array_elements_text(CAST({param} AS json)))"

    def in_texts(self, param: str) -> str:
        return f"(SELECT value FROM json_array_elements_text(CAST({param} AS json)))"

    def byte_length(self, column: str) -> str:
        return f"octet_length({column})"

    def indexed_by(self, index: str) -> str:
        return ""  # PostgreSQL plans on its own


SQLITE: Dialect = _Sqlite()
POSTGRES: Dialect = _Postgres()
#: Every engine's dialect.
DIALECTS = (SQLITE, POSTGRES)


def named(name: str) -> Dialect:
    """The dialect SQLAlchemy calls ``name`` (``sqlite``, ``postgresql``)."""
    for dialect in DIALECTS:
        if dialect.name == name:
            return dialect
    raise ValueError(f"durableq has no {name!r} engine")


def for_each_dialect(build: Callable[[Dialect], T]) -> dict[Dialect, T]:
    """``build(dialect)`` for every dialect: a statement (or a few) written once with the dialect's
    fragments, built at import, looked up by ``conn.dialect`` where it runs."""
    return {dialect: build(dialect) for dialect in DIALECTS}


def encode_ids(ids: Iterable[int | str]) -> str:
    """The bound value of an :meth:`~Dialect.in_ids` or :meth:`~Dialect.in_texts` parameter (one
    parameter for any number of values)."""
    return json.dumps(list(ids))
