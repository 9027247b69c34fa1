"""fair queues: queues say whether they were ever sent a message group id: grouped

A standard queue whose messages carry a group id (SQS's fair queues: the message's tenant) orders its
receives so that a noisy group does not delay the others (``ops/fairness.py``); a queue that never
saw one claims as before, without looking for noisy groups.  The flag is set with the first such
message and never cleared; here, on the standard queues that already hold one.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "durableq_queues", sa.Column("grouped", sa.Boolean, nullable=False, server_default=sa.false())
    )
    op.execute(
        "UPDATE durableq_queues SET grouped = TRUE WHERE NOT fifo AND EXISTS ("
        "SELECT 1 FROM durableq_messages m WHERE m.queue_id = durableq_queues.id AND m.group_id IS NOT NULL)"
    )


def downgrade() -> None:
    # SQLite drops a column in place since 3.35 (no table copy).
    op.drop_column("durableq_queues", "grouped")
