"""Where a broker's data lives: a SQLite file's path, or a PostgreSQL URL, and the engine for it
(psycopg is imported only when a URL asks for PostgreSQL)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from .. import limits
from .files import prepare_file

if TYPE_CHECKING:
    from .base import Database

#: The URL schemes of a PostgreSQL database.
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def postgres_url(location: str) -> bool:
    """Does ``location`` name a PostgreSQL database (rather than a SQLite file)?"""
    return location.startswith(POSTGRES_SCHEMES)


def redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_database(
    location: str | os.PathLike[str], durability: str, busy_timeout: float, *, create: bool = True
) -> Database:
    """The engine ``location`` names: a ``postgresql://`` URL, or else a SQLite file (created private
    if missing, unless ``create`` is False).  Nothing connects before the first statement."""
    if isinstance(location, str) and postgres_url(location):
        from .postgres import Database as PostgresDatabase

        return PostgresDatabase(location, durability=durability, busy_timeout=busy_timeout)
    from .sqlite import Database as SqliteDatabase

    file = Path(location)
    if create:
        prepare_file(file, limits.DEFAULT_FILE_MODE)
    return SqliteDatabase(file, durability=durability, busy_timeout=busy_timeout)
