"""temporary and virtual queues: an idle timeout and a heartbeat time per queue; a message's
virtual queue

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("queues", sa.Column("idle_timeout", sa.Integer))
    op.add_column("queues", sa.Column("touched_at", sa.BigInteger))
    op.add_column("messages", sa.Column("virtual", sa.Text))
    op.create_index(
        "ix_messages_virtual",
        "messages",
        ["queue_id", "virtual", "visible_at", "enqueued_at", "receive_count"],
        sqlite_where=sa.text("virtual IS NOT NULL"),
        postgresql_where=sa.text("virtual IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_virtual", "messages")
    op.drop_column("messages", "virtual")
    op.drop_column("queues", "touched_at")
    op.drop_column("queues", "idle_timeout")
