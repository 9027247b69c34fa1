"""durableq shares the application's database: its names all begin ``durableq_`` (revision 0009
renamed them), and on PostgreSQL they live in a schema of their own.  The application's tables and
data survive everything durableq does; a database from before 0009 upgrades keeping its messages
and goes back with ``durableq db downgrade 0008``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from durableq.cli import main

import durableq
from durableq.engines import migrate
from durableq.engines.fileformat import APPLICATION_ID, LEGACY_VERSION_TABLE, SCHEMA_REVISION, VERSION_TABLE
from durableq.engines.location import open_database
from durableq.engines.postgres.locks import writers_key
from durableq.engines.postgres.notify import channel
from tests.conftest import FakeClock
from tests.test_migrations import _diff, _named

APP_ID = 0x0A_BB_CC_DD


def _app_file(path: Path, application_id: int = 0) -> None:
    """An application's SQLite file: its own tables (an alembic_version of its own among them)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
    conn.execute("CREATE INDEX ix_orders_item ON orders (item)")
    conn.execute("CREATE TABLE queues (name TEXT)")  # a name durableq used before 0009
    conn.execute("CREATE TABLE alembic_version (version_num TEXT)")
    conn.executemany("INSERT INTO orders (item) VALUES (?)", [("book",), ("lamp",)])
    conn.execute("INSERT INTO queues VALUES ('the app''s own')")
    conn.execute("INSERT INTO alembic_version VALUES ('app_rev_7')")
    conn.execute(f"PRAGMA application_id = {application_id}")
    conn.commit()
    conn.close()


def _app_state(path: Path | str) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        return {
            "orders": conn.execute("SELECT id, item FROM orders ORDER BY id").fetchall(),
            "queues": conn.execute("SELECT name FROM queues").fetchall(),
            "alembic_version": conn.execute("SELECT version_num FROM alembic_version").fetchall(),
            "index": conn.execute("SELECT sql FROM sqlite_master WHERE name = 'ix_orders_item'").fetchall(),
            "application_id": conn.execute("PRAGMA application_id").fetchone()[0],
        }
    finally:
        conn.close()


def _names(path: Path | str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
        }
    finally:
        conn.close()


@pytest.mark.parametrize("application_id", [0, APP_ID])
def test_an_applications_file_is_shared_and_its_tables_survive_every_operation(
    db_path: Path, clock: FakeClock, tmp_path: Path, application_id: int
) -> None:
    _app_file(db_path, application_id)
    before = _app_state(db_path)
    with durableq.open(db_path, clock=clock, durability="normal") as broker:
        assert _app_state(db_path) == before  # the application's id kept, 0 included
        # Made at head at once (engines/sqlite/shared.py), as the revisions make it; the rest is the app's.
        assert [d for d in _diff(db_path) if "durableq_" in _named(d)[1]] == []
        jobs = broker.create_queue("jobs", retention_period=60, history=True)
        jobs.send("first")
        [message] = jobs.receive()
        assert message.body == "first"
        jobs.delete(message.receipt_handle)
        jobs.send_batch([durableq.SendEntry("a", "a"), durableq.SendEntry("b", "b")])
        jobs.purge()
        jobs.send("expires")
        clock.advance(120)
        assert jobs.receive() == []  # the retention sweep ran
        broker.create_queue("gone").send("x")
        broker.delete_queue("gone")
        backup = broker.backup(tmp_path / "backup.db")  # the whole file, the application's tables too
        assert _app_state(db_path) == before
    assert _app_state(backup) == before
    with durableq.open(db_path, clock=clock) as broker:  # recognised by its version table
        assert broker.get_queue("jobs").name == "jobs"
    database = open_database(db_path, "normal", 5, create=False)
    try:
        assert migrate.downgrade(database, "base") is None
    finally:
        database.close()
    assert _app_state(db_path) == before
    assert {n for n in _names(db_path) if n.startswith("durableq_")} == set()  # nothing of durableq's left
    assert _names(db_path) == {"orders", "ix_orders_item", "queues", "alembic_version"}


def test_a_new_empty_file_still_gets_durableqs_application_id(db_path: Path) -> None:
    durableq.open(db_path).close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE durableq_messages (id INTEGER)",
        "CREATE INDEX durableq_ix_messages_visible ON orders (item)",
    ],
)
def test_an_applications_name_that_takes_durableqs_is_refused(db_path: Path, statement: str) -> None:
    _app_file(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute(statement)
    conn.commit()
    conn.close()
    before = db_path.read_bytes()
    with pytest.raises(durableq.NotADurableQDatabase, match=r"which durableq did not make.*durableq_…"):
        durableq.open(db_path)
    assert db_path.read_bytes() == before


def _downgrade_cli(location: str, revision: str, *, code: int = 0) -> str:
    result = CliRunner().invoke(main, ["--db", location, "db", "downgrade", revision, "--json"])
    assert result.exit_code == code, result.output
    return result.output


def _legacy_sqlite_names(path: Path) -> set[str]:
    return {
        n for n in _names(path) if n in (LEGACY_VERSION_TABLE, VERSION_TABLE, "queues", "durableq_queues")
    }


def test_a_file_at_0008_upgrades_keeping_its_messages_and_goes_back(db_path: Path, clock: FakeClock) -> None:
    with durableq.open(db_path, clock=clock) as broker:
        broker.create_queue("jobs").send("sent before 0009")
        broker.create_queue("old.fifo", fifo=True).send("fifo", group_id="g", deduplication_id="d")
    _downgrade_cli(str(db_path), "0008")
    # As the durableq of revision 0008 made it: unprefixed, alembic's default version table.
    assert _legacy_sqlite_names(db_path) == {LEGACY_VERSION_TABLE, "queues"}
    assert {n for n in _names(db_path) if n.startswith("durableq_")} == set()
    assert "messages_payload_gone" in _names(db_path) and "ix_messages_visible" in _names(db_path)
    with durableq.open(db_path, clock=clock) as broker:  # upgraded by revision 0009
        assert [m.body for m in broker.get_queue("jobs").receive()] == ["sent before 0009"]
        [fifo] = broker.get_queue("old.fifo").receive()
        assert fifo.body == "fifo" and fifo.sequence_number is not None
    assert _legacy_sqlite_names(db_path) == {VERSION_TABLE, "durableq_queues"}
    database = open_database(db_path, "normal", 5, create=False)
    try:
        assert migrate.current(database) == SCHEMA_REVISION
    finally:
        database.close()
    _downgrade_cli(str(db_path), "0008")
    assert _legacy_sqlite_names(db_path) == {LEGACY_VERSION_TABLE, "queues"}


def test_a_shared_file_cannot_go_below_0009_when_its_old_names_are_the_applications(db_path: Path) -> None:
    _app_file(db_path)  # holds "queues"
    durableq.open(db_path).close()
    database = open_database(db_path, "normal", 5, create=False)
    try:
        with pytest.raises(
            durableq.NotADurableQDatabase, match=r"cannot go back below revision 0009.*queues"
        ):
            migrate.downgrade(database, "0008")
        assert migrate.current(database) == SCHEMA_REVISION  # nothing done
    finally:
        database.close()


# -- PostgreSQL ------------------------------------------------------------------------------------


def _tables(url: str, schema: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
    return {row[0] for row in rows}


@pytest.fixture
def empty_pg(pg_cluster: Any) -> Any:
    from tests import pgcluster

    name = pgcluster.create_database(pg_cluster)
    try:
        yield pg_cluster.url(name)
    finally:
        pgcluster.drop_database(pg_cluster, name)


def test_postgres_tables_live_in_their_schema_beside_an_applications_queues(empty_pg: str) -> None:
    with psycopg.connect(empty_pg, autocommit=True) as app:
        app.execute("CREATE TABLE queues (name text)")
        app.execute("INSERT INTO queues VALUES ('the app''s own')")
    with durableq.open(empty_pg, durability="normal") as broker:
        queue = broker.create_queue("jobs")
        queue.send("x")
        assert [m.body for m in queue.receive()] == ["x"]
        assert broker.options.schema == "durableq"
    assert "durableq_queues" in _tables(empty_pg, "durableq")
    assert _tables(empty_pg, "public") == {"queues"}
    with psycopg.connect(empty_pg) as app:
        assert app.execute("SELECT name FROM queues").fetchall() == [("the app's own",)]


def test_a_postgres_database_at_0008_moves_into_the_schema_and_goes_back(empty_pg: str) -> None:
    with durableq.open(empty_pg, durability="normal") as broker:
        broker.create_queue("jobs").send("sent before 0009")
    _downgrade_cli(empty_pg, "0008")
    # As an older durableq left it: in public, unprefixed, its revision in public.durableq_version.
    assert {"queues", "messages", "durableq_version", "durableq_catalog"} <= _tables(empty_pg, "public")
    assert _tables(empty_pg, "durableq") == set()
    with durableq.open(empty_pg, durability="normal") as broker:
        assert [m.body for m in broker.get_queue("jobs").receive()] == ["sent before 0009"]
    assert _tables(empty_pg, "public") == set()
    assert {"durableq_queues", VERSION_TABLE} <= _tables(empty_pg, "durableq")
    with psycopg.connect(empty_pg, autocommit=True) as app:  # now the application may have its own
        app.execute("CREATE TABLE queues (name text)")
    with durableq.open(empty_pg, durability="normal") as broker:
        broker.get_queue("jobs").send("after")
    # public.queues is the application's now: durableq's tables stay in the schema, at 0008, and it says so.
    said = _downgrade_cli(empty_pg, "0008", code=1)
    assert "public, which holds tables of another application named as durableq's (queues)" in said
    assert _tables(empty_pg, "public") == {"queues"}
    assert {"queues", VERSION_TABLE} <= _tables(empty_pg, "durableq")
    with durableq.open(empty_pg, durability="normal") as broker:  # this durableq finds it, and upgrades it
        assert [m.body for m in broker.get_queue("jobs").receive()] == ["after"]


def test_two_schemas_are_two_installations(empty_pg: str, clock: FakeClock) -> None:
    with (
        durableq.open(empty_pg, schema="shop", clock=clock, durability="normal") as shop,
        durableq.open(empty_pg, schema="billing", clock=clock, durability="normal") as billing,
    ):
        shop.create_queue("jobs").send("for the shop")
        billing.create_queue("jobs").send("for billing")
        billing.create_queue("only_billing")
        assert shop.list_queues() == ["jobs"]
        assert [m.body for m in shop.get_queue("jobs").receive()] == ["for the shop"]
        assert [m.body for m in billing.get_queue("jobs").receive()] == ["for billing"]
        reopened = durableq.reopen(shop.options)  # a worker process's broker: the same schema
        try:
            assert reopened.list_queues() == ["jobs"]
        finally:
            reopened.close()
    assert {"durableq_queues"} <= _tables(empty_pg, "shop") and {"durableq_queues"} <= _tables(
        empty_pg, "billing"
    )
    assert channel("shop") != channel("billing") and writers_key("shop") != writers_key("billing")


@pytest.mark.parametrize("bad", ["", "Shop", "pg_toast", "1st", "a-b", "x" * 49, "information_schema", 7])
def test_a_bad_schema_name_is_refused(bad: object) -> None:
    with pytest.raises(
        durableq.InvalidParameterValue, match=r"schema must be 1 to 48 characters of a-z 0-9 _"
    ):
        durableq.open("postgresql://nobody@127.0.0.1:1/none", schema=bad)  # type: ignore[arg-type]


def test_a_schema_for_a_sqlite_file_is_refused(db_path: Path) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="schema applies to a PostgreSQL database"):
        durableq.open(db_path, schema="shop")
    assert not db_path.exists()


@pytest.mark.parametrize("autocommit", [False, True])
def test_durableqs_statements_run_on_the_applications_connection(empty_pg: str, autocommit: bool) -> None:
    with durableq.open(empty_pg, durability="normal") as broker:
        broker.create_queue("jobs")
        db = broker._rt.db
        with psycopg.connect(empty_pg, autocommit=autocommit) as app:
            app.execute("CREATE TABLE orders (item text)")
            app.execute("SET search_path = public")
            if not autocommit:
                app.commit()
            with db.on_foreign_connection(app) as conn:
                assert conn is app
                assert conn.execute("SELECT name FROM durableq_queues").fetchall() == [("jobs",)]
                conn.execute("INSERT INTO orders VALUES ('book')")  # the application's, still found
            assert app.execute("SHOW search_path").fetchone() == ("public",)
            with pytest.raises(psycopg.errors.UndefinedTable):
                app.execute("SELECT 1 FROM durableq_queues")
            if not autocommit:
                app.rollback()
                assert app.execute("SHOW search_path").fetchone() == ("public",)


def test_on_a_sqlite_file_the_foreign_connection_needs_nothing(db_path: Path) -> None:
    with durableq.open(db_path) as broker:
        broker.create_queue("jobs")
        app = sqlite3.connect(db_path)
        try:
            with broker._rt.db.on_foreign_connection(app) as conn:
                assert conn.execute("SELECT name FROM durableq_queues").fetchall() == [("jobs",)]
        finally:
            app.close()


def test_one_schemas_writers_lock_holds_up_no_other_schema(empty_pg: str) -> None:
    with (
        durableq.open(empty_pg, schema="shop", durability="normal", busy_timeout=1) as shop,
        durableq.open(empty_pg, schema="billing", durability="normal", busy_timeout=1) as billing,
    ):
        shop_jobs, billing_jobs = shop.create_queue("jobs"), billing.create_queue("jobs")
        with psycopg.connect(empty_pg, autocommit=True) as admin:
            admin.execute("SELECT pg_advisory_lock(%s)", (writers_key("shop"),))  # shop's writers wait
            billing_jobs.send("billing goes on")
            assert [m.body for m in billing_jobs.receive()] == ["billing goes on"]
            with pytest.raises(durableq.DatabaseLocked):
                shop_jobs.send("waits for the lock")
            admin.execute("SELECT pg_advisory_unlock(%s)", (writers_key("shop"),))
        shop_jobs.send("after")
        assert [m.body for m in shop_jobs.receive()] == ["after"]
