"""What identifies a durableq file, without importing the schema (SQLAlchemy is slow to import,
and every command-line call pays for it)."""

from __future__ import annotations

from ..errors import DatabaseError

#: The alembic revision this code expects; a test checks it is the head of ``migrations/``.
SCHEMA_REVISION = "0012"
#: ``PRAGMA application_id`` of a durableq file ("dq1q"), so other SQLite files are told apart.
APPLICATION_ID = 0x64713171
#: How a database that is not there yet is made (the commands that may create one say so too).
HOW_TO_CREATE = "create one with durableq init"

#: The first letters of every name durableq gives a table, an index or a trigger (revision 0009), so
#: that a database it shares with an application never holds a name of both.  ``schema.py`` builds
#: its names from it; the statements of ``ops/`` spell them out (``FROM durableq_messages``), as SQL
#: reads best with its names written in full, and tests/test_schema_names.py checks that every name
#: a statement uses is one of ``schema.py``'s.
PREFIX = "durableq_"
#: alembic's table of the revision (``migrations/env.py``), on either engine.
VERSION_TABLE = f"{PREFIX}alembic_version"
#: Where a SQLite file before revision 0009 kept its revision (alembic's default name): such a file
#: was durableq's alone.  ``prepare_migration`` moves the row to :data:`VERSION_TABLE`, and a downgrade
#: below 0009 moves it back, so the durableq of that revision opens the file again.
LEGACY_VERSION_TABLE = "alembic_version"
#: The revision that gave every name :data:`PREFIX` (and, on PostgreSQL, a schema of its own).
PREFIXED_REVISION = "0009"


def check_readable(where: str, revision: str | None) -> None:
    """Refuse to read a database (its name as shown: ``where``) at another schema revision than this
    code's, with what to do about it (a reader never migrates)."""
    if revision != SCHEMA_REVISION:
        raise DatabaseError(
            f"{where} is at schema revision {revision!r}; this durableq reads {SCHEMA_REVISION!r}. "
            "Open it once with durableq (or `durableq db upgrade`) to migrate it"
        )
