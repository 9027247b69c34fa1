"""the audit trail: one row per management call (create, delete, attributes, purge, tags, permissions, moves)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from durableq.engines.schema import ROW_ID

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", ROW_ID, primary_key=True),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("user", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("queue", sa.Text),
        sa.Column("outcome", sa.Text, nullable=False),
        sa.Column("detail", sa.Text),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_events_queue", "audit_events", ["queue", "at"])
    op.create_index("ix_audit_events_at", "audit_events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_at", "audit_events")
    op.drop_index("ix_audit_events_queue", "audit_events")
    op.drop_table("audit_events")
