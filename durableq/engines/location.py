"""Where a broker's data lives: a SQLite file's path, or a PostgreSQL URL, and the engine for it
(psycopg is imported only when a URL asks for PostgreSQL)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from .. import limits
from ..errors import UnsupportedOperation
from .files import prepare_file

if TYPE_CHECKING:
    from .base import Database

#: The URL schemes of a PostgreSQL database.
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
#: The parameters of a libpq URL that hold a secret (compared with the name decoded, in any case).
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
#: What stands for a secret where a location is shown.
HIDDEN = "***"
#: What to install for the PostgreSQL engine.
POSTGRES_INSTALL_HINT = "pip install 'durableq[postgres]'"


def postgres_url(location: str) -> bool:
    """Does ``location`` name a PostgreSQL database (rather than a SQLite file)?"""
    return location.startswith(POSTGRES_SCHEMES)


def redacted(location: str) -> str:
    """``location`` as it may be shown (a repr, an error message, a log, a CLI line): a PostgreSQL
    URL with every secret libpq reads from it replaced by ``***`` (the password of ``user:password@``,
    and the ``password`` and ``sslpassword`` parameters, their names in any case or percent-encoded);
    a file's path as it is.  The one place that decides what of a location is shown."""
    if not postgres_url(location):
        return location
    parts = urlsplit(location)
    # Split by hand: urlsplit's hostname and port refuse libpq's lists of hosts ("h1:5432,h2:5433").
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if ":" in userinfo:
        userinfo = f"{userinfo.partition(':')[0]}:{HIDDEN}"
    query = "&".join(_hidden_parameter(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{hosts}", query=query))


def _hidden_parameter(pair: str) -> str:
    name, equals, _ = pair.partition("=")
    return f"{name}={HIDDEN}" if equals and unquote_plus(name).lower() in _SECRET_PARAMETERS else pair


def _secrets(location: str) -> list[str]:
    """The secrets written in ``location`` (as written, and decoded), longest first: what a driver's
    own message might quote and :func:`scrubbed` takes out."""
    if not postgres_url(location):
        return []
    parts = urlsplit(location)
    userinfo = parts.netloc.rpartition("@")[0]
    found = [userinfo.partition(":")[2]] if ":" in userinfo else []
    for pair in parts.query.split("&"):
        name, equals, value = pair.partition("=")
        if equals and unquote_plus(name).lower() in _SECRET_PARAMETERS:
            found.append(value)
    spellings = {spelling for secret in found if secret for spelling in (secret, unquote_plus(secret))}
    return sorted(spellings, key=len, reverse=True)


def scrubbed(text: str, location: str) -> str:
    """``text`` (a driver's message about ``location``, which may quote the URL or a piece of it:
    libpq does, for a malformed one) with every secret of ``location`` hidden."""
    text = text.replace(location, redacted(location))
    for secret in _secrets(location):
        text = text.replace(secret, HIDDEN)
    return text


def postgres_engine(location: str) -> ModuleType:
    """The PostgreSQL engine (:mod:`.postgres`), imported: a clear error if its driver (the
    ``postgres`` extra) is not installed.  ``location``: the URL that asked for it."""
    try:
        from . import postgres
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


def open_database(
    location: str | os.PathLike[str], durability: str, busy_timeout: float, *, create: bool = True
) -> Database:
    """The engine ``location`` names: a ``postgresql://`` URL, or else a SQLite file (created private
    if missing, unless ``create`` is False).  Nothing connects before the first statement."""
    if isinstance(location, str) and postgres_url(location):
        database: Database = postgres_engine(location).Database(
            location, durability=durability, busy_timeout=busy_timeout
        )
        return database
    from .sqlite import Database as SqliteDatabase

    file = Path(location)
    if create:
        prepare_file(file, limits.DEFAULT_FILE_MODE)
    return SqliteDatabase(file, durability=durability, busy_timeout=busy_timeout)
