"""The database schema, declared with SQLAlchemy Core.

The alembic revisions in ``migrations/`` create exactly these tables (a test
compares them).  Times are epoch milliseconds in ``BIGINT`` columns: 64-bit
values that outlive 2038 (the SQLite JDBC driver reads them as decimals and
``INTEGER`` columns as 32-bit ints, so the Spark reader states each column's type).  Statements live
next to the concept they implement (``send.py``, ``receive.py`` ...); this
module only says what is stored.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import TextClause

from .dialect import SQLITE, named
from .fileformat import PREFIX

metadata = MetaData()

#: Row ids of tables that may see billions of rows over their life (64-bit on PostgreSQL, where
#: ``INTEGER`` is 32-bit; SQLite's ``INTEGER PRIMARY KEY`` rowid is 64-bit already).
ROW_ID = Integer().with_variant(BigInteger(), "postgresql")


def random_hex(bind: Connection) -> TextClause:
    """Server default of 8 random bytes in hex, in the SQL of ``bind``'s engine."""
    return text(f"({named(bind.dialect.name).random_hex})")


queues = Table(
    f"{PREFIX}queues",
    metadata,
    # AUTOINCREMENT: a deleted queue's id is never reused, so its receipt handles stay invalid.
    Column("id", Integer, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("fifo", Boolean, nullable=False),
    Column("visibility_timeout", Integer, nullable=False),
    Column("delay_seconds", Integer, nullable=False),
    Column("retention_period", Integer, nullable=False),
    Column("receive_wait_time", Integer, nullable=False),
    Column("maximum_message_size", Integer, nullable=False),
    Column("content_based_deduplication", Boolean, nullable=False),
    Column("deduplication_scope", Text, nullable=False),
    Column("dead_letter_queue", Text),
    Column("max_receive_count", Integer),
    Column("redrive_permission", Text),
    Column("redrive_source_queues", Text),  # JSON list of names, for permission "byQueue"
    Column("created_at", BigInteger, nullable=False),
    Column("last_modified", BigInteger, nullable=False),
    Column("next_sequence", BigInteger, nullable=False, server_default=text("0")),  # FIFO
    # Settings of SQS clients (revision 0002); the encryption ones are acted on since revision 0007.
    Column("policy", Text),
    Column("kms_master_key_id", Text),
    Column("kms_data_key_reuse_period", Integer, nullable=False, server_default=text("300")),
    # (New queues get False, as SPEC §7 says; revision 0007 turned it off on queues that said True
    # while nothing was encrypted.  The column's own default stays, to spare the table a rebuild.)
    Column("sqs_managed_sse_enabled", Boolean, nullable=False, server_default=true()),
    Column("fifo_throughput_limit", Text),
    # Message history (revision 0005): opt-in, like CloudTrail's data events.
    Column("history", Boolean, nullable=False, server_default=false()),
    Column("history_retention", Integer, nullable=False, server_default=text("604800")),
    # Temporary queues (revision 0006): deleted after idle_timeout seconds without use; NULL for
    # the others.  touched_at: the latest heartbeat of a process that holds it.
    Column("idle_timeout", Integer),
    Column("touched_at", BigInteger),
    # Large payloads and encryption at rest (revision 0007).  ``sealed``: encryption was ever on, so
    # the queue may hold encrypted rows (set with the setting, never cleared).
    Column("large_payloads", Boolean, nullable=False, server_default=false()),
    Column("sealed", Boolean, nullable=False, server_default=false()),
    # Fair queues (revision 0012): a standard queue that was ever sent a message with a group id (set
    # then, never cleared).  Only its receives look for noisy groups (``ops/fairness.py``).
    Column("grouped", Boolean, nullable=False, server_default=false()),
    sqlite_autoincrement=True,
)

messages = Table(
    f"{PREFIX}messages",
    metadata,
    Column("id", ROW_ID, primary_key=True),
    Column("queue_id", Integer, nullable=False),
    Column("message_id", Text, nullable=False),
    # Random per message; every receipt handle of the message carries it.
    Column("secret", Text, nullable=False, server_default=text(f"({SQLITE.random_hex})")),
    Column("body", Text, nullable=False),
    Column("attributes", Text),
    Column("enqueued_at", BigInteger, nullable=False),
    Column("visible_at", BigInteger, nullable=False),
    Column("receive_count", Integer, nullable=False, server_default=text("0")),
    Column("receipt_handle", Text),  # the latest handle issued; NULL until received
    Column("received_at", BigInteger),  # time of the latest receive: the 12-hour cap counts from it
    Column("first_received_at", BigInteger),
    Column("group_id", Text),
    Column("deduplication_id", Text),
    Column("sequence", BigInteger),
    Column("dead_letter_source", Text),
    Column("trace_header", Text),  # AWSTraceHeader (revision 0002)
    Column("virtual", Text),  # the virtual queue of its queue it belongs to (revision 0006), or NULL
    # Revision 0007.  data_key_id: the data key that encrypted body, attributes and payload_meta (NULL:
    # stored in plaintext).  A large payload lives in the payload store as file payload_ref (body is
    # then ''); payload_size is its plaintext size, payload_meta its SHA-256, MD5 and file key (JSON).
    Column("data_key_id", Integer),
    Column("payload_ref", Text),
    Column("payload_size", BigInteger),
    Column("payload_meta", Text),
    # Receive claims the head of this index; with enqueued_at and receive_count in it,
    # stats and the in-flight check count from the index alone, reading no message row.
    Index(f"{PREFIX}ix_messages_visible", "queue_id", "visible_at", "enqueued_at", "receive_count"),
    # Retention sweeps and the oldest-message age.
    Index(f"{PREFIX}ix_messages_enqueued", "queue_id", "enqueued_at"),
    # Receive of a virtual queue: its own head, however many virtual queues share the host.
    Index(
        f"{PREFIX}ix_messages_virtual",
        "queue_id",
        "virtual",
        "visible_at",
        "enqueued_at",
        "receive_count",
        sqlite_where=text("virtual IS NOT NULL"),
        postgresql_where=text("virtual IS NOT NULL"),
    ),
    # Is a payload file named by a row?  (The orphan sweep asks, file by file.)
    Index(
        f"{PREFIX}ix_messages_payload",
        "payload_ref",
        sqlite_where=text("payload_ref IS NOT NULL"),
        postgresql_where=text("payload_ref IS NOT NULL"),
    ),
    Index(
        f"{PREFIX}ix_messages_group",
        "queue_id",
        "group_id",
        "sequence",
        sqlite_where=text("group_id IS NOT NULL"),
        postgresql_where=text("group_id IS NOT NULL"),
    ),
)

tags = Table(
    f"{PREFIX}tags",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
    sqlite_with_rowid=False,
)

queue_metrics = Table(
    f"{PREFIX}queue_metrics",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("minute", BigInteger, primary_key=True),  # epoch ms of the minute's start
    Column("sent", BigInteger, nullable=False, server_default=text("0")),
    Column("received", BigInteger, nullable=False, server_default=text("0")),
    Column("deleted", BigInteger, nullable=False, server_default=text("0")),
    Column("moved_to_dead_letter", BigInteger, nullable=False, server_default=text("0")),
    Column("expired", BigInteger, nullable=False, server_default=text("0")),
    Column("empty_receives", BigInteger, nullable=False, server_default=text("0")),
    Column("moved_in", BigInteger, nullable=False, server_default=text("0")),  # revision 0003
    Column("moved_out", BigInteger, nullable=False, server_default=text("0")),
    Column("purged", BigInteger, nullable=False, server_default=text("0")),
    sqlite_with_rowid=False,
)

# The management calls made on the file, always kept (revision 0004): the CloudTrail analogue.
audit_events = Table(
    f"{PREFIX}audit_events",
    metadata,
    # AUTOINCREMENT: ids only grow, so "after event N" is a checkpoint a reader can keep.
    Column("id", ROW_ID, primary_key=True),
    Column("at", BigInteger, nullable=False),  # broker clock, epoch ms
    Column("pid", Integer, nullable=False),
    Column("user", Text, nullable=False),  # the OS user of the process
    Column("action", Text, nullable=False),  # SQS's name: CreateQueue, PurgeQueue, ...
    Column("queue", Text),
    Column("outcome", Text, nullable=False),  # "OK" or the error's code
    Column("detail", Text),  # JSON: what changed (attribute names, tag keys, a task handle, ...)
    Index(f"{PREFIX}ix_audit_events_queue", "queue", "at"),
    Index(f"{PREFIX}ix_audit_events_at", "at"),
    sqlite_autoincrement=True,
)

# What happened to each message of a queue with history on (revision 0005), written in the
# transaction of the operation itself: the data events.  Goes with its queue, like its counters.
message_events = Table(
    f"{PREFIX}message_events",
    metadata,
    # The rowid: ids only grow and are never reused (see durableq/ops/history.py: the newest row is
    # never deleted), so "after event N" is a safe checkpoint.  Not AUTOINCREMENT: its bookkeeping
    # row is one more page in every commit (measured: about 8 % of a send at durability "full").
    Column("event_id", ROW_ID, primary_key=True),
    Column("queue_id", Integer, nullable=False),
    Column("at", BigInteger, nullable=False),  # broker clock, epoch ms
    Column("event", Text, nullable=False),  # sent, received, visibility_changed, deleted, ...
    Column("message_id", Text, nullable=False),
    Column("receive_count", Integer, nullable=False),  # the message's, after the event
    Column("other_queue", Text),  # a move's other end: where it went, or where it came from
    # When the message becomes visible after the event, epoch ms (revision 0011): of a send (its delay
    # apart from its wait) and a visibility change; null for the others.
    Column("visible_at", BigInteger),
    # Reads and the retention sweep of one queue.
    Index(f"{PREFIX}ix_message_events_queue", "queue_id", "at"),
)

# Data keys (revision 0007): each encrypts messages for its queue's reuse period; stored wrapped
# (AES-256-GCM) by a master key of the keyring, named by alias and version.  Never deleted: a message
# names its data key by id for as long as it lives.
data_keys = Table(
    f"{PREFIX}data_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("alias", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("wrapped", Text, nullable=False),  # base64 of nonce + ciphertext
    Column("created_at", BigInteger, nullable=False),
    # A broker that needs a data key takes the newest one of the master key's version within the
    # queue's reuse period, whoever stored it.
    Index(f"{PREFIX}ix_data_keys_alias", "alias", "version", "created_at"),
    sqlite_autoincrement=True,
)

# Payload files whose message row is gone (revision 0007), written by the trigger
# ``durableq_messages_payload_gone`` in the transaction that removed the row, whichever process and operation
# did (delete, expiry, purge, queue deletion); any broker removes the files and then these rows.
payload_trash = Table(
    f"{PREFIX}payload_trash",
    metadata,
    Column("ref", Text, primary_key=True),
    sqlite_with_rowid=False,
)

# The database's identity (revision 0008): one random id, made by the migration, that its payload
# store is bound to (ops/payload_owner.py), so that two databases never share one store.
database_identity = Table(
    f"{PREFIX}database_identity",
    metadata,
    Column("id", Text, primary_key=True),
)

message_moves = Table(
    f"{PREFIX}message_moves",
    metadata,
    Column("task_handle", Text, primary_key=True),
    Column("source", Text, nullable=False),
    Column("destination", Text),
    Column("max_per_second", Integer),
    Column("status", Text, nullable=False),
    Column("moved", BigInteger, nullable=False, server_default=text("0")),
    Column("to_move", BigInteger, nullable=False),
    Column("started_at", BigInteger, nullable=False),
    Column("heartbeat_at", BigInteger, nullable=False),
    Column("failure_reason", Text),
    Index(f"{PREFIX}ix_message_moves_source", "source", "started_at"),
)

fifo_groups = Table(
    f"{PREFIX}fifo_groups",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("queue_id", Integer, nullable=False),
    Column("group_id", Text, nullable=False),
    # When the group may next be served: its head is visible and nothing of it is in flight.
    Column("available_at", BigInteger, nullable=False),
    UniqueConstraint("queue_id", "group_id", name=f"{PREFIX}uq_fifo_groups_group"),
    Index(f"{PREFIX}ix_fifo_groups_available", "queue_id", "available_at"),
)

fifo_deduplication = Table(
    f"{PREFIX}fifo_deduplication",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("scope", Text, primary_key=True),  # '' for queue scope, else the group id
    Column("deduplication_id", Text, primary_key=True),
    Column("message_id", Text, nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Index(f"{PREFIX}ix_fifo_deduplication_expires", "queue_id", "expires_at"),
    sqlite_with_rowid=False,
)

receive_attempts = Table(
    f"{PREFIX}receive_attempts",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("attempt_id", Text, primary_key=True),
    Column("expires_at", BigInteger, nullable=False),
    Column("messages", Text, nullable=False),  # JSON [[row id, receipt handle, visible_at], ...]
    Index(f"{PREFIX}ix_receive_attempts_expires", "queue_id", "expires_at"),
    sqlite_with_rowid=False,
)

# Schedules (revision 0010): messages sent on a timetable (durableq/schedules/).  ``next_fire_at`` is
# the scheduled time of the next tick (NULL: none left), ``send_at`` when it is sent (later within the
# flexible window); ``version`` grows with every change and every claimed tick, so that a claim (an
# UPDATE guarded by the version it read) succeeds for one scheduler only.
schedules = Table(
    f"{PREFIX}schedules",
    metadata,
    Column("name", Text, primary_key=True),
    Column("queue", Text, nullable=False),
    Column("expression", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("attributes", Text),  # JSON, as a message's (ops/attributes.py)
    Column("timezone", Text, nullable=False),
    Column("start_at", BigInteger),
    Column("end_at", BigInteger),
    Column("flexible_window", Integer, nullable=False),
    Column("catch_up", Text, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("anchor_at", BigInteger, nullable=False),  # where a rate counts from
    Column("next_fire_at", BigInteger),
    Column("send_at", BigInteger),
    Column("last_fire_at", BigInteger),  # the scheduled time of the last tick sent
    Column("version", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index(f"{PREFIX}ix_schedules_due", "enabled", "send_at"),
)
