"""What identifies a durableq file, without importing the schema (SQLAlchemy is slow to import,
and every command-line call pays for it)."""

from __future__ import annotations

from ..errors import DatabaseError

#: The alembic revision this code expects; a test checks it is the head of ``migrations/``.
SCHEMA_REVISION = "0008"
#: ``PRAGMA application_id`` of a durableq file ("dq1q"), so other SQLite files are told apart.
APPLICATION_ID = 0x64713171


def check_readable(where: str, revision: str | None) -> None:
    """Refuse to read a database (its name as shown: ``where``) at another schema revision than this
    code's, with what to do about it (a reader never migrates)."""
    if revision != SCHEMA_REVISION:
        raise DatabaseError(
            f"{where} is at schema revision {revision!r}; this durableq reads {SCHEMA_REVISION!r}. "
            "Open it once with durableq (or `durableq db upgrade`) to migrate it"
        )
