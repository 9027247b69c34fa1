"""settings SQS clients store: access policy, encryption, FIFO throughput limit; message trace header

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Plain ALTER TABLE (no batch mode): adding a column is instant however many
# messages the file holds, and the queues table keeps its AUTOINCREMENT.
_QUEUE_COLUMNS = (
    sa.Column("policy", sa.Text),
    sa.Column("kms_master_key_id", sa.Text),
    sa.Column("kms_data_key_reuse_period", sa.Integer, nullable=False, server_default=sa.text("300")),
    sa.Column("sqs_managed_sse_enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("fifo_throughput_limit", sa.Text),
)


def upgrade() -> None:
    for column in _QUEUE_COLUMNS:
        op.add_column("queues", column)
    op.execute("UPDATE queues SET fifo_throughput_limit = 'perQueue' WHERE fifo")
    op.add_column("messages", sa.Column("trace_header", sa.Text))


def downgrade() -> None:
    op.drop_column("messages", "trace_header")
    for column in reversed(_QUEUE_COLUMNS):
        op.drop_column("queues", column.name)
