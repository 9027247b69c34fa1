"""Migrations are tested like code: head equals the declared schema, and down/up keeps data."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

import durableq
from durableq.engines import migrate
from durableq.engines.fileformat import SCHEMA_REVISION
from durableq.engines.schema import metadata
from durableq.engines.sqlite import Database


def _diff(path: Path) -> list:
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, metadata)


def test_upgrade_head_creates_exactly_the_declared_schema(broker: durableq.Broker) -> None:
    assert _diff(broker.path) == []


def test_the_code_expects_the_head_revision(db_path: Path) -> None:
    db = Database(db_path, durability="normal", busy_timeout=1)
    scripts = ScriptDirectory.from_config(migrate.alembic_config(db))
    assert scripts.get_heads() == [SCHEMA_REVISION]
    history = migrate.history(db)
    assert history[0].revision == SCHEMA_REVISION and history[0].is_head
    assert history[-1].down_revision is None
    assert all(newer.down_revision == older.revision for newer, older in itertools.pairwise(history))


def test_time_columns_are_declared_bigint(broker: durableq.Broker) -> None:
    conn = sqlite3.connect(broker.path)
    columns = {row[1]: row[2] for row in conn.execute("PRAGMA table_info(messages)")}
    for name in ("enqueued_at", "visible_at", "received_at", "first_received_at"):
        assert columns[name] == "BIGINT", name


def test_downgrade_and_upgrade_round_trip_on_a_file_with_messages(db_path: Path, clock) -> None:
    with durableq.open(db_path, clock=clock) as broker:
        queue = broker.create_queue("jobs")
        queue.send("kept across migrations")
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        assert migrate.current(db) == SCHEMA_REVISION
        # Downgrading the first revision drops its tables (and so the messages).
        migrate.downgrade(db, "base")
        assert migrate.current(db) is None
        tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables - {"sqlite_sequence"} == {"alembic_version"}
        assert migrate.upgrade(db) == SCHEMA_REVISION
    finally:
        db.close()
    assert _diff(db_path) == []
    with durableq.open(db_path, clock=clock) as broker:
        queue = broker.create_queue("jobs")
        queue.send("after the round trip")
        assert [m.body for m in queue.receive()] == ["after the round trip"]


def test_a_file_at_an_older_revision_is_upgraded_keeping_its_messages(db_path: Path, clock) -> None:
    with durableq.open(db_path, clock=clock) as broker:
        broker.create_queue("old.fifo", fifo=True).send("from before", group_id="g", deduplication_id="d")
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        migrate.downgrade(db, "0001")
        assert migrate.current(db) == "0001"
    finally:
        db.close()
    with durableq.open(db_path, clock=clock) as broker:  # open() migrates to head again
        queue = broker.get_queue("old.fifo")
        assert queue.attributes()["fifo_throughput_limit"] == "perQueue"
        [message] = queue.receive()
        assert message.body == "from before" and message.trace_header is None
    assert _diff(db_path) == []


def test_opening_an_up_to_date_file_does_not_load_alembic(db_path: Path, clock) -> None:
    durableq.open(db_path, clock=clock).close()
    code = "import sys, durableq; durableq.open(sys.argv[1]).close(); print('alembic' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code, str(db_path)], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_queue_ids_are_never_reused(broker: durableq.Broker) -> None:
    conn = sqlite3.connect(broker.path)
    (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'queues'").fetchone()
    assert "AUTOINCREMENT" in ddl  # alembic's compare does not look at it; receipt handles rely on it
