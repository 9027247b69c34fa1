"""durableq's names get the prefix durableq_: a database it shares with an application

Every table, index and trigger of durableq is renamed ``durableq_<name>``, so that an application's
tables can live in the same SQLite file (or, on PostgreSQL, beside durableq's schema) without ever
taking a name of durableq's.  SQLite renames a table's references in its indexes and triggers with
it, but has no RENAME for an index or a trigger: those are made again from their own SQL under the
new name.  PostgreSQL renames all three; its trigger function is made again, bound to the schema it
was made in (``SET search_path FROM CURRENT``), so it finds its table on any connection, the
application's included.

The version table is no concern of this revision (alembic stamps the one it is configured with):
the engines move the revision between the old and the new version table (see
``durableq.engines.migrate``), and on PostgreSQL the old tables into durableq's schema.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from durableq.errors import NotADurableQDatabase

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

PREFIX = "durableq_"  # as durableq.engines.fileformat.PREFIX was when this revision was written

TABLES = (
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
)
INDEXES = (
    "ix_messages_visible",
    "ix_messages_enqueued",
    "ix_messages_virtual",
    "ix_messages_payload",
    "ix_messages_group",
    "ix_audit_events_queue",
    "ix_audit_events_at",
    "ix_message_events_queue",
    "ix_data_keys_alias",
    "ix_message_moves_source",
    "ix_fifo_groups_available",
    "ix_fifo_deduplication_expires",
    "ix_receive_attempts_expires",
)
TRIGGER = "messages_payload_gone"
UNIQUE = ("fifo_groups", "uq_fifo_groups_group")  # an index of its own on PostgreSQL; in the table on SQLite

_PG_FUNCTION = """
CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO {trash} (ref) VALUES (old.payload_ref) ON CONFLICT DO NOTHING;
  RETURN old;
END
$$
"""
_PG_TRIGGER = """
CREATE TRIGGER {trigger} AFTER DELETE ON {messages}
FOR EACH ROW WHEN (old.payload_ref IS NOT NULL) EXECUTE FUNCTION {trigger}()
"""


def upgrade() -> None:
    _rename_all(lambda name: PREFIX + name)


def downgrade() -> None:
    _refuse_taken_names()
    _rename_all(lambda name: name.removeprefix(PREFIX))


def _refuse_taken_names() -> None:
    """Older revisions' names may be an application's now (the file or schema is shared): say so,
    rather than fail half way on SQLite's or PostgreSQL's own error."""
    bind = op.get_bind()
    names = (*TABLES, *INDEXES, TRIGGER)
    if bind.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE name IN ({})"
    else:
        query = (
            "SELECT relname FROM pg_class "
            "WHERE relnamespace = CAST(current_schema() AS regnamespace) AND relname IN ({})"
        )
    taken = [row[0] for row in bind.exec_driver_sql(query.format(", ".join(f"'{n}'" for n in names)))]
    if taken:
        raise NotADurableQDatabase(
            f"cannot go back below revision 0009: the database holds tables of another application "
            f"named as durableq's were before it ({', '.join(sorted(taken))}); only revision 0009 and "
            "later share a database"
        )


def _rename_all(renamed) -> None:  # type: ignore[no-untyped-def]
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    old_trigger, new_trigger = _names(TRIGGER, renamed)
    if postgres:
        op.execute(f"DROP TRIGGER {old_trigger} ON {_names('messages', renamed)[0]}")
        op.execute(f"DROP FUNCTION {old_trigger}()")
    for table in TABLES:
        old, new = _names(table, renamed)
        op.rename_table(old, new)
    for index in INDEXES:
        old, new = _names(index, renamed)
        if postgres:
            op.execute(f"ALTER INDEX {old} RENAME TO {new}")
        else:
            _make_again(bind, "index", old, new)
    table, constraint = (_names(name, renamed) for name in UNIQUE)
    if postgres:
        op.execute(f"ALTER TABLE {table[1]} RENAME CONSTRAINT {constraint[0]} TO {constraint[1]}")
    else:  # a name inside the table's own SQL: the (small) table is made again
        with op.batch_alter_table(table[1], recreate="always") as batch:
            batch.drop_constraint(constraint[0], type_="unique")
            batch.create_unique_constraint(constraint[1], ["queue_id", "group_id"])
    if postgres:
        names = {"trigger": new_trigger, "trash": renamed("payload_trash"), "messages": renamed("messages")}
        op.execute(_PG_FUNCTION.format(**names))
        op.execute(_PG_TRIGGER.format(**names))
    else:
        _make_again(bind, "trigger", old_trigger, new_trigger)


def _names(name: str, renamed) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(the name now, the name after) of ``name`` (given unprefixed)."""
    after = renamed(name)
    before = PREFIX + name if after == name else name
    return before, after


def _make_again(bind: sa.engine.Connection, kind: str, old: str, new: str) -> None:
    """SQLite: drop the index or trigger ``old`` and make it again, from its own SQL, as ``new``
    (its table's name in that SQL is already the new one: SQLite rewrote it with the table)."""
    row = bind.exec_driver_sql(
        f"SELECT sql FROM sqlite_master WHERE type = '{kind}' AND name = '{old}'"
    ).first()
    if row is None:
        raise NotADurableQDatabase(
            f"the {kind} {old} of durableq is missing; the database was changed by hand"
        )
    sql: str = row[0]
    head = f"CREATE {kind.upper()} {old} "
    if not sql.startswith(head):
        raise NotADurableQDatabase(f"the {kind} {old} of durableq was changed by hand: {sql[:80]}")
    op.execute(f"DROP {kind.upper()} {old}")
    op.execute(f"CREATE {kind.upper()} {new} " + sql[len(head) :])
