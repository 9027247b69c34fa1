"""per-minute counters of messages moved in, moved out by move tasks, and purged

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_COUNTERS = ("moved_in", "moved_out", "purged")


def upgrade() -> None:
    for name in _COUNTERS:
        op.add_column(
            "queue_metrics", sa.Column(name, sa.BigInteger, nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    for name in reversed(_COUNTERS):
        op.drop_column("queue_metrics", name)
