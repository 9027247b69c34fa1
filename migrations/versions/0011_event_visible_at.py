"""message events say when the message becomes visible: visible_at

A ``sent`` event carries when its message becomes visible (later than the send by its delay), and a
``visibility_changed`` event the new time; so the wait before the first receive can be split into
the delay and the time spent queueing.  A nullable column: older events, and the other kinds, have
none; adding it rewrites no row on either engine.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLE = "durableq_message_events"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("visible_at", sa.BigInteger))


def downgrade() -> None:
    # SQLite drops a column in place since 3.35 (no table copy): the events keep their ids.
    op.drop_column(TABLE, "visible_at")
