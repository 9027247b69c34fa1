"""message history: per-queue opt-in, the message_events table

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from durableq.engines.schema import ROW_ID

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("queues", sa.Column("history", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column(
        "queues",
        sa.Column("history_retention", sa.Integer, nullable=False, server_default=sa.text("604800")),
    )
    op.create_table(
        "message_events",
        sa.Column("event_id", ROW_ID, primary_key=True),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("message_id", sa.Text, nullable=False),
        sa.Column("receive_count", sa.Integer, nullable=False),
        sa.Column("other_queue", sa.Text),
    )
    op.create_index("ix_message_events_queue", "message_events", ["queue_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_message_events_queue", "message_events")
    op.drop_table("message_events")
    op.drop_column("queues", "history_retention")
    op.drop_column("queues", "history")
