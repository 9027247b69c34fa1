"""Where a broker's data lives: a SQLite file's path, or a PostgreSQL URL, and the engine for it
(psycopg is imported only when a URL asks for PostgreSQL)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .. import limits
from ..errors import NotADurableQDatabase, UnsupportedOperation
from .fileformat import HOW_TO_CREATE
from .files import check_existing, prepare_file
from .urls import postgres_url, redacted

if TYPE_CHECKING:
    from .base import Database

#: What to install for the PostgreSQL engine.
POSTGRES_INSTALL_HINT = "pip install 'durableq[postgres]'"


def postgres_engine(location: str) -> ModuleType:
    """The PostgreSQL engine (:mod:`.postgres.database`), imported: a clear error if its driver (the
    ``postgres`` extra) is not installed.  ``location``: the URL that asked for it."""
    try:
        from .postgres import database as postgres
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("psycopg", "psycopg_binary", "psycopg_c"):
            raise
        raise UnsupportedOperation(
            f"{redacted(location)} is a PostgreSQL database, and its driver (psycopg) is not "
            f"installed; install the PostgreSQL extra with: {POSTGRES_INSTALL_HINT}"
        ) from exc
    return postgres


def file_of(location: str | os.PathLike[str]) -> Path | None:
    """The file ``location`` names (a SQLite database's path), or None for a PostgreSQL URL (the server
    keeps the data): known before the database is opened, and afterwards as ``Database.path``."""
    if isinstance(location, str) and postgres_url(location):
        return None
    return Path(location)


def require_file(location: str | os.PathLike[str]) -> None:
    """Refuse a SQLite path with no file (NotADurableQDatabase), making none: the rule of an open
    that may not create the database.  A PostgreSQL database exists before durableq sees it (its
    server's administrator creates it); whether it holds durableq's tables is
    :func:`.migrate.require_schema`'s question."""
    file = file_of(location)
    if file is None:
        return
    if not file.exists():
        raise NotADurableQDatabase(f"no durableq database at {file}: {HOW_TO_CREATE}")
    check_existing(file)  # a folder, a file too short to be SQLite


def open_database(
    location: str | os.PathLike[str],
    durability: str,
    busy_timeout: float,
    *,
    create: bool = True,
    schema: str | None = None,
) -> Database:
    """The engine ``location`` names: a ``postgresql://`` URL (its tables in ``schema``, default
    :data:`..limits.DEFAULT_POSTGRES_SCHEMA`), or else a SQLite file (created private if missing,
    unless ``create`` is False).  Nothing connects before the first statement."""
    if isinstance(location, str) and postgres_url(location):
        database: Database = postgres_engine(location).Database(
            location,
            durability=durability,
            busy_timeout=busy_timeout,
            schema=schema or limits.DEFAULT_POSTGRES_SCHEMA,
        )
        return database
    from .sqlite.database import Database as SqliteDatabase

    file = Path(location)
    if create:
        prepare_file(file, limits.DEFAULT_FILE_MODE)
    return SqliteDatabase(file, durability=durability, busy_timeout=busy_timeout)
