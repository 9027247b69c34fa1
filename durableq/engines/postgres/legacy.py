"""durableq's schema on PostgreSQL, and the databases from before it.

Since revision 0009 durableq's tables live in a schema of their own (default ``durableq``: see
``durableq.open(url, schema=...)``), under names that begin ``durableq_``.  Before it they lived
where the connection's ``search_path`` put them, ``public`` (the only place an older durableq's
default path creates in), unprefixed, with the revision in ``public.durableq_version``.

alembic stamps the version table it is configured with (``durableq_alembic_version`` in durableq's
schema), and revision 0009 renames tables in the schema the migration runs in; so the move between
``public`` and the schema is done here, around alembic: :func:`adopt` before an upgrade, :func:`restore`
after a downgrade below 0009, each in one transaction (a kill leaves the tables at one place or the
other, and this code finds them at either).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import NotADurableQDatabase
from ..fileformat import PREFIXED_REVISION, VERSION_TABLE
from .connection import Connection

#: Where durableq's tables were before revision 0009.
LEGACY_SCHEMA = "public"
#: The version table there.
LEGACY_VERSION_TABLE = "durableq_version"
#: Every table durableq had made by revision 0008 (a database at an older revision has some of them).
LEGACY_TABLES = (
    "queues",
    "messages",
    "tags",
    "queue_metrics",
    "audit_events",
    "message_events",
    "data_keys",
    "payload_trash",
    "database_identity",
    "message_moves",
    "fifo_groups",
    "fifo_deduplication",
    "receive_attempts",
    "durableq_catalog",
    LEGACY_VERSION_TABLE,
)
#: The trigger function of revision 0007 (a function lives in a schema, not in its table).
LEGACY_FUNCTION = "messages_payload_gone"


def _exists(conn: Connection, name: str) -> bool:
    (found,) = conn.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()
    return bool(found)


def _function_exists(conn: Connection, schema: str) -> bool:
    (found,) = conn.execute(
        "SELECT to_regprocedure(?) IS NOT NULL", (f"{schema}.{LEGACY_FUNCTION}()",)
    ).fetchone()
    return bool(found)


def _legacy(conn: Connection, schema: str) -> bool:
    """Does the database hold durableq's tables from before 0009, and ``schema`` none of its own?"""
    return not _exists(conn, f"{schema}.{VERSION_TABLE}") and _exists(
        conn, f"{LEGACY_SCHEMA}.{LEGACY_VERSION_TABLE}"
    )


def revision(conn: Connection, schema: str) -> str | None:
    """The revision of the durableq of ``schema``; or, while ``schema`` has none, of durableq's tables
    from before revision 0009 (that the upgrade moves into ``schema``); None: neither."""
    if _exists(conn, f"{schema}.{VERSION_TABLE}"):
        table = f"{schema}.{VERSION_TABLE}"
    elif _exists(conn, f"{LEGACY_SCHEMA}.{LEGACY_VERSION_TABLE}"):
        table = f"{LEGACY_SCHEMA}.{LEGACY_VERSION_TABLE}"
    else:
        return None
    row = conn.execute(f"SELECT version_num FROM {table}").fetchone()
    return row[0] if row else None


@contextmanager
def _transaction(conn: Connection) -> Iterator[None]:
    conn.run("BEGIN")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.run("COMMIT")


def adopt(conn: Connection, schema: str) -> None:
    """Before an upgrade: ``schema`` made if missing (by a role that may, unless it exists), and
    durableq's tables from before revision 0009 moved into it, their revision into its version table."""
    with _transaction(conn):
        (missing,) = conn.execute("SELECT to_regnamespace(?) IS NULL", (schema,)).fetchone()
        if missing:
            conn.run(f"CREATE SCHEMA {schema}")
        if not _legacy(conn, schema):
            return
        if schema != LEGACY_SCHEMA:
            for table in LEGACY_TABLES:
                if _exists(conn, f"{LEGACY_SCHEMA}.{table}"):
                    conn.run(f"ALTER TABLE {LEGACY_SCHEMA}.{table} SET SCHEMA {schema}")
            if _function_exists(conn, LEGACY_SCHEMA):
                conn.run(f"ALTER FUNCTION {LEGACY_SCHEMA}.{LEGACY_FUNCTION}() SET SCHEMA {schema}")
        conn.run(f"ALTER TABLE {schema}.{LEGACY_VERSION_TABLE} RENAME TO {VERSION_TABLE}")


def restore(conn: Connection, schema: str, revision: str | None) -> None:
    """After a downgrade to ``revision``: at base, durableq's version table goes (the schema stays: it
    may hold more); below 0009, the tables go back to ``public``, where an older durableq finds them,
    unless ``public`` holds an application's tables of those names (then they stay, and this is said)."""
    with _transaction(conn):
        if not _exists(conn, f"{schema}.{VERSION_TABLE}"):
            return
        if revision is None:
            conn.run(f"DROP TABLE {schema}.{VERSION_TABLE}")
            return
        if revision >= PREFIXED_REVISION:
            return
        if schema != LEGACY_SCHEMA:
            tables = [
                row[0]
                for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = ?", (schema,))
            ]
            moved = [t for t in tables if t != VERSION_TABLE] + [LEGACY_VERSION_TABLE]
            taken = [t for t in moved if _exists(conn, f"{LEGACY_SCHEMA}.{t}")]
            if taken or _function_exists(conn, LEGACY_SCHEMA):
                raise NotADurableQDatabase(
                    f"the database is at revision {revision} in schema {schema}, where this durableq "
                    f"opens it; an older one looks in {LEGACY_SCHEMA}, which holds tables of another "
                    f"application named as durableq's ({', '.join(taken) or LEGACY_FUNCTION}), so they stay"
                )
            for table in tables:
                conn.run(f"ALTER TABLE {schema}.{table} SET SCHEMA {LEGACY_SCHEMA}")
            if _function_exists(conn, schema):
                conn.run(f"ALTER FUNCTION {schema}.{LEGACY_FUNCTION}() SET SCHEMA {LEGACY_SCHEMA}")
        conn.run(f"ALTER TABLE {LEGACY_SCHEMA}.{VERSION_TABLE} RENAME TO {LEGACY_VERSION_TABLE}")
