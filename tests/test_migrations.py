"""Migrations are tested like code: head equals the declared schema, and down/up keeps data."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

import durableq
from durableq.engines import migrate
from durableq.engines.fileformat import SCHEMA_REVISION
from durableq.engines.schema import metadata
from durableq.engines.sqlite.database import Database
from tests.conftest import sql_rows


def _engine(target: str | Path) -> Engine:
    """A SQLAlchemy engine on ``target``: a SQLite file, or a PostgreSQL URL (through psycopg)."""
    url = str(target)
    if url.startswith("postgresql://"):
        return create_engine(
            url.replace("postgresql://", "postgresql+psycopg://", 1),
            poolclass=NullPool,
            connect_args={"options": "-c search_path=durableq"},  # durableq's schema (the default)
        )
    return create_engine(f"sqlite:///{url}", poolclass=NullPool)


def _version_table(target: str | Path) -> str:
    """The table alembic keeps the revision in (on either engine)."""
    return Database.version_table


#: What the migrations make on PostgreSQL only, beyond the declared schema: the catalog's change
#: counter (SQLite keeps it in PRAGMA user_version) and the column that stands in for SQLite's rowid.
POSTGRES_ONLY = {("remove_table", "durableq_catalog"), ("remove_column", "durableq_message_moves.rowid")}


def _named(difference: Any) -> tuple[str, str]:
    """A difference of ``compare_metadata`` as its kind and what it names (tables and columns only)."""
    if isinstance(difference, tuple) and difference[0] in ("add_table", "remove_table"):
        return difference[0], difference[1].name
    if isinstance(difference, tuple) and difference[0] in ("add_column", "remove_column"):
        return difference[0], f"{difference[2]}.{difference[3].name}"
    return "other", repr(difference)


def _diff(target: str | Path) -> list:
    """How the database differs from the declared schema (on PostgreSQL: besides POSTGRES_ONLY, which
    must all be there)."""
    engine = _engine(target)
    try:
        with engine.connect() as connection:
            options = {"compare_type": True, "version_table": _version_table(target)}
            context = MigrationContext.configure(connection, opts=options)
            differences = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    if engine.dialect.name != "postgresql":
        return differences
    assert {_named(d) for d in differences} >= POSTGRES_ONLY
    return [d for d in differences if _named(d) not in POSTGRES_ONLY]


def test_upgrade_head_creates_exactly_the_declared_schema(broker: durableq.Broker, target: str) -> None:
    assert _diff(target) == []


def test_the_code_expects_the_head_revision(db_path: Path) -> None:
    db = Database(db_path, durability="normal", busy_timeout=1)
    scripts = ScriptDirectory.from_config(migrate.alembic_config(db))
    assert scripts.get_heads() == [SCHEMA_REVISION]
    history = migrate.history(db)
    assert history[0].revision == SCHEMA_REVISION and history[0].is_head
    assert history[-1].down_revision is None
    assert all(newer.down_revision == older.revision for newer, older in itertools.pairwise(history))


def test_time_columns_are_declared_bigint(broker: durableq.Broker, target: str) -> None:
    engine = _engine(target)
    try:
        columns = {c["name"]: str(c["type"]) for c in inspect(engine).get_columns("durableq_messages")}
    finally:
        engine.dispose()
    for name in ("enqueued_at", "visible_at", "received_at", "first_received_at"):
        assert columns[name] == "BIGINT", name


def test_downgrade_and_upgrade_round_trip_on_a_file_with_messages(db_path: Path, clock) -> None:
    with durableq.open(db_path, clock=clock) as broker:
        queue = broker.create_queue("jobs")
        queue.send("kept across migrations")
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        assert migrate.current(db) == SCHEMA_REVISION
        # Downgrading the first revision drops its tables (and so the messages), the version table too.
        migrate.downgrade(db, "base")
        assert migrate.current(db) is None
        tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables - {"sqlite_sequence"} == set()
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


def test_revision_0012_makes_the_standard_queues_holding_group_ids_fair(db_path: Path, clock) -> None:
    with durableq.open(db_path, clock=clock) as broker:
        broker.create_queue("tenants").send("a's", group_id="a")
        broker.create_queue("plain").send("nobody's")
        broker.create_queue("old.fifo", fifo=True).send("g's", group_id="g", deduplication_id="d")
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        migrate.downgrade(db, "0011")
        migrate.upgrade(db)
        rows = db.conn.execute("SELECT name, grouped FROM durableq_queues ORDER BY name").fetchall()
    finally:
        db.close()
    assert [(name, bool(grouped)) for name, grouped in rows] == [
        ("old.fifo", False),
        ("plain", False),
        ("tenants", True),
    ]


def test_opening_an_up_to_date_file_does_not_load_alembic(db_path: Path, clock) -> None:
    durableq.open(db_path, clock=clock).close()
    code = "import sys, durableq; durableq.open(sys.argv[1]).close(); print('alembic' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code, str(db_path)], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_queue_ids_are_never_reused(broker: durableq.Broker, target: str) -> None:
    # Receipt handles rely on it, and alembic's compare does not look at how ids are given (SQLite's
    # AUTOINCREMENT; a sequence on PostgreSQL): the id of the newest queue, deleted, is not given again.
    broker.create_queue("first")
    [(first,)] = sql_rows(target, "SELECT id FROM durableq_queues WHERE name = ?", "first")
    broker.delete_queue("first")
    broker.create_queue("second")
    [(second,)] = sql_rows(target, "SELECT id FROM durableq_queues WHERE name = ?", "second")
    assert second > first


_OPEN_WITH_LOGGING = """
import logging, sys
logging.basicConfig(level=logging.INFO)
if sys.argv[2] == "asked":
    logging.getLogger("alembic").setLevel(logging.INFO)
import durableq
durableq.open(sys.argv[1]).close()
"""


def test_alembic_is_quiet_unless_its_logger_is_asked(tmp_path: Path) -> None:
    """An application's ``basicConfig(level=INFO)`` shows no alembic set-up chatter when a file is
    created; setting alembic's own logger's level still shows it."""

    def lines(case: str) -> list[str]:
        ran = subprocess.run(
            [sys.executable, "-c", _OPEN_WITH_LOGGING, str(tmp_path / f"{case}.db"), case],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return [line for line in ran.stderr.splitlines() if "alembic" in line]

    assert lines("quiet") == []
    assert any("Running upgrade" in line for line in lines("asked"))
