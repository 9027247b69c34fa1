"""schedules: messages sent on a timetable, exactly once per tick (durableq/schedules/)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

PREFIX = "durableq_"  # as durableq.engines.fileformat.PREFIX was when this revision was written


def upgrade() -> None:
    op.create_table(
        f"{PREFIX}schedules",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("queue", sa.Text, nullable=False),
        sa.Column("expression", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("attributes", sa.Text),
        sa.Column("timezone", sa.Text, nullable=False),
        sa.Column("start_at", sa.BigInteger),
        sa.Column("end_at", sa.BigInteger),
        sa.Column("flexible_window", sa.Integer, nullable=False),
        sa.Column("catch_up", sa.Text, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("anchor_at", sa.BigInteger, nullable=False),
        sa.Column("next_fire_at", sa.BigInteger),
        sa.Column("send_at", sa.BigInteger),
        sa.Column("last_fire_at", sa.BigInteger),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index(f"{PREFIX}ix_schedules_due", f"{PREFIX}schedules", ["enabled", "send_at"])


def downgrade() -> None:
    op.drop_index(f"{PREFIX}ix_schedules_due", f"{PREFIX}schedules")
    op.drop_table(f"{PREFIX}schedules")
