"""large payloads and encryption at rest: payload and data-key columns of messages, the data_keys
and payload_trash tables, the trigger that records a removed row's payload file

Queues that said ``sqs_managed_sse_enabled`` before this revision held plaintext (the setting was
stored, not acted on): they say False now, so that no existing queue starts to need a keyring.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The rule "a payload file goes when its row goes", once, for every way a row goes and every process.
PAYLOAD_GONE_TRIGGER = """
CREATE TRIGGER messages_payload_gone AFTER DELETE ON messages
WHEN old.payload_ref IS NOT NULL
BEGIN
  INSERT OR IGNORE INTO payload_trash (ref) VALUES (old.payload_ref);
END
"""
# PostgreSQL's spelling of the same rule.
PAYLOAD_GONE_TRIGGER_PG = [
    """
CREATE FUNCTION messages_payload_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO payload_trash (ref) VALUES (old.payload_ref) ON CONFLICT DO NOTHING;
  RETURN old;
END
$$
""",
    """
CREATE TRIGGER messages_payload_gone AFTER DELETE ON messages
FOR EACH ROW WHEN (old.payload_ref IS NOT NULL) EXECUTE FUNCTION messages_payload_gone()
""",
]


def upgrade() -> None:
    op.add_column(
        "queues", sa.Column("large_payloads", sa.Boolean, nullable=False, server_default=sa.false())
    )
    op.add_column("queues", sa.Column("sealed", sa.Boolean, nullable=False, server_default=sa.false()))
    op.execute("UPDATE queues SET sqs_managed_sse_enabled = FALSE")
    op.add_column("messages", sa.Column("data_key_id", sa.Integer))
    op.add_column("messages", sa.Column("payload_ref", sa.Text))
    op.add_column("messages", sa.Column("payload_size", sa.BigInteger))
    op.add_column("messages", sa.Column("payload_meta", sa.Text))
    op.create_index(
        "ix_messages_payload",
        "messages",
        ["payload_ref"],
        sqlite_where=sa.text("payload_ref IS NOT NULL"),
        postgresql_where=sa.text("payload_ref IS NOT NULL"),
    )
    op.create_table(
        "data_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("alias", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("wrapped", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_data_keys_alias", "data_keys", ["alias", "version", "created_at"])
    op.create_table(
        "payload_trash",
        sa.Column("ref", sa.Text, primary_key=True),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        for statement in PAYLOAD_GONE_TRIGGER_PG:
            op.execute(statement)
    else:
        op.execute(PAYLOAD_GONE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER messages_payload_gone ON messages")
        op.execute("DROP FUNCTION messages_payload_gone()")
    else:
        op.execute("DROP TRIGGER messages_payload_gone")
    op.drop_table("payload_trash")
    op.drop_table("data_keys")
    op.drop_index("ix_messages_payload", "messages")
    for column in ("payload_meta", "payload_size", "payload_ref", "data_key_id"):
        op.drop_column("messages", column)
    op.drop_column("queues", "sealed")
    op.drop_column("queues", "large_payloads")
