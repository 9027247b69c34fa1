"""What identifies a durableq file, without importing the schema (SQLAlchemy is slow to import,
and every command-line call pays for it)."""

from __future__ import annotations

#: The alembic revision this code expects; a test checks it is the head of ``migrations/``.
SCHEMA_REVISION = "0008"
#: ``PRAGMA application_id`` of a durableq file ("dq1q"), so other SQLite files are told apart.
APPLICATION_ID = 0x64713171
