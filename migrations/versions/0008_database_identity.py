"""the database's identity: a random id, one row, that its payload store is bound to

Two databases given the same payload folder each took the other's payload files for orphans (no
row of its own names them) and swept them; the store now names the database it serves.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    identity = op.create_table("database_identity", sa.Column("id", sa.Text, primary_key=True))
    op.bulk_insert(identity, [{"id": secrets.token_hex(16)}])


def downgrade() -> None:
    op.drop_table("database_identity")
