"""initial schema: queues, messages, tags, metrics, move tasks, FIFO tables

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from durableq.engines.schema import ROW_ID, random_hex

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queues",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=False, unique=True),
        sa.Column("fifo", sa.Boolean, nullable=False),
        sa.Column("visibility_timeout", sa.Integer, nullable=False),
        sa.Column("delay_seconds", sa.Integer, nullable=False),
        sa.Column("retention_period", sa.Integer, nullable=False),
        sa.Column("receive_wait_time", sa.Integer, nullable=False),
        sa.Column("maximum_message_size", sa.Integer, nullable=False),
        sa.Column("content_based_deduplication", sa.Boolean, nullable=False),
        sa.Column("deduplication_scope", sa.Text, nullable=False),
        sa.Column("dead_letter_queue", sa.Text),
        sa.Column("max_receive_count", sa.Integer),
        sa.Column("redrive_permission", sa.Text),
        sa.Column("redrive_source_queues", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_modified", sa.BigInteger, nullable=False),
        sa.Column("next_sequence", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "messages",
        sa.Column("id", ROW_ID, primary_key=True),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("message_id", sa.Text, nullable=False),
        sa.Column("secret", sa.Text, nullable=False, server_default=random_hex(op.get_bind())),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("attributes", sa.Text),
        sa.Column("enqueued_at", sa.BigInteger, nullable=False),
        sa.Column("visible_at", sa.BigInteger, nullable=False),
        sa.Column("receive_count", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("receipt_handle", sa.Text),
        sa.Column("received_at", sa.BigInteger),
        sa.Column("first_received_at", sa.BigInteger),
        sa.Column("group_id", sa.Text),
        sa.Column("deduplication_id", sa.Text),
        sa.Column("sequence", sa.BigInteger),
        sa.Column("dead_letter_source", sa.Text),
    )
    op.create_index(
        "ix_messages_visible", "messages", ["queue_id", "visible_at", "enqueued_at", "receive_count"]
    )
    op.create_index("ix_messages_enqueued", "messages", ["queue_id", "enqueued_at"])
    op.create_index(
        "ix_messages_group",
        "messages",
        ["queue_id", "group_id", "sequence"],
        sqlite_where=sa.text("group_id IS NOT NULL"),
        postgresql_where=sa.text("group_id IS NOT NULL"),
    )
    op.create_table(
        "tags",
        sa.Column("queue_id", sa.Integer, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "queue_metrics",
        sa.Column("queue_id", sa.Integer, primary_key=True),
        sa.Column("minute", sa.BigInteger, primary_key=True),
        *(
            sa.Column(name, sa.BigInteger, nullable=False, server_default=sa.text("0"))
            for name in ("sent", "received", "deleted", "moved_to_dead_letter", "expired", "empty_receives")
        ),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "message_moves",
        sa.Column("task_handle", sa.Text, primary_key=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("destination", sa.Text),
        sa.Column("max_per_second", sa.Integer),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("moved", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("to_move", sa.BigInteger, nullable=False),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger, nullable=False),
        sa.Column("failure_reason", sa.Text),
        # Tasks of one source are listed newest first, ties in the order they started: by SQLite's
        # rowid, which PostgreSQL has not; there a column of that name stands in.
        *(
            [sa.Column("rowid", sa.BigInteger, sa.Identity())]
            if op.get_bind().dialect.name == "postgresql"
            else []
        ),
    )
    op.create_index("ix_message_moves_source", "message_moves", ["source", "started_at"])
    op.create_table(
        "fifo_groups",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("group_id", sa.Text, nullable=False),
        sa.Column("available_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("queue_id", "group_id", name="uq_fifo_groups_group"),
    )
    op.create_index("ix_fifo_groups_available", "fifo_groups", ["queue_id", "available_at"])
    op.create_table(
        "fifo_deduplication",
        sa.Column("queue_id", sa.Integer, primary_key=True),
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("deduplication_id", sa.Text, primary_key=True),
        sa.Column("message_id", sa.Text, nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_fifo_deduplication_expires", "fifo_deduplication", ["queue_id", "expires_at"])
    op.create_table(
        "receive_attempts",
        sa.Column("queue_id", sa.Integer, primary_key=True),
        sa.Column("attempt_id", sa.Text, primary_key=True),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("messages", sa.Text, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_receive_attempts_expires", "receive_attempts", ["queue_id", "expires_at"])
    if op.get_bind().dialect.name == "postgresql":
        # The catalog's counter of queue-row changes (SQLite keeps it in PRAGMA user_version).
        op.create_table("durableq_catalog", sa.Column("version", sa.BigInteger, nullable=False))
        op.execute("INSERT INTO durableq_catalog (version) VALUES (0)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_table("durableq_catalog")
    for table in (
        "receive_attempts",
        "fifo_deduplication",
        "fifo_groups",
        "message_moves",
        "queue_metrics",
        "tags",
        "messages",
        "queues",
    ):
        op.drop_table(table)
