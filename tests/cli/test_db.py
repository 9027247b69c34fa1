"""init, the db migration commands, --db / DURABLEQ_DB, and refusing a missing file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq
from durableq.engines import migrate
from durableq.engines.fileformat import VERSION_TABLE
from durableq.engines.location import open_database
from tests import pgcluster
from tests.conftest import sql_rows

from .conftest import Run


@pytest.fixture
def location(engine: str, db: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """What ``--db`` names in these tests: where ``init`` and ``db upgrade`` start from.  The file
    ``db``, not made yet (SQLite), or a new database durableq never migrated (PostgreSQL: its
    administrator creates the database, durableq its tables)."""
    if engine == "sqlite":
        yield str(db)
        return
    cluster: pgcluster.Cluster = request.getfixturevalue("pg_cluster")
    name = pgcluster.create_database(cluster)  # empty: not a copy of the migrated template
    try:
        yield cluster.url(name)
    finally:
        pgcluster.drop_database(cluster, name)


def _postgres(location: str) -> bool:
    return location.startswith("postgresql://")


def _head(location: str) -> str:
    database = open_database(location, "normal", 1.0, create=False)
    try:
        return next(r.revision for r in migrate.history(database) if r.is_head)
    finally:
        database.close()


def test_init_creates_and_migrates_the_file(run: Run, location: str) -> None:
    result = run("init", "--json")
    report = json.loads(result.stdout)
    assert report == {"path": location, "created": True, "revision": _head(location)}
    with durableq.open(location) as broker:
        assert broker.list_queues() == []
    again = json.loads(run("init", "--json").stdout)
    assert again["created"] is False
    assert "schema revision" in run("init").stdout


def test_db_current_history_and_upgrade(run: Run, location: str) -> None:
    run("init")
    head = _head(location)
    assert json.loads(run("db", "current", "--json").stdout) == {"revision": head, "head": head}
    assert f"{head} (head)" in run("db", "current").stdout
    history = json.loads(run("db", "history", "--json").stdout)
    assert history[0]["revision"] == head and history[0]["is_head"] is True
    assert head in run("db", "history").stdout
    assert json.loads(run("db", "upgrade", "--json").stdout) == {"from": head, "to": head}
    assert f"already at {head}" in run("db", "upgrade").stdout


def test_db_upgrade_migrates_an_empty_file(run: Run, db: Path, location: str) -> None:
    if not _postgres(location):
        db.touch()  # a PostgreSQL database starts empty (the fixture's)
    assert json.loads(run("db", "current", "--json").stdout)["revision"] is None
    assert "not migrated" in run("db", "current").stdout
    report = json.loads(run("db", "upgrade", "--json").stdout)
    assert report == {"from": None, "to": _head(location)}
    assert json.loads(run("db", "current", "--json").stdout)["revision"] == _head(location)


def test_db_history_needs_no_file(run: Run, db: Path, location: str) -> None:
    history = run("db", "history").stdout
    if _postgres(location):  # the database is left as it was: durableq made no table in it
        assert json.loads(run("db", "current", "--json").stdout)["revision"] is None
    else:
        assert not db.exists()
    assert f"{_head(location)} " in history


@pytest.mark.parametrize(
    "args",
    [
        ("queue", "list"),
        ("queue", "show", "jobs"),
        ("receive", "jobs"),
        ("peek", "jobs"),
        ("stats",),
        ("redrive", "jobs-dlq"),
        ("db", "current"),
        ("db", "upgrade"),
    ],
)
@pytest.mark.sqlite_only("a missing file; a PostgreSQL database is made by its server's administrator")
def test_a_missing_file_is_an_error_not_a_new_file(run: Run, db: Path, args: tuple[str, ...]) -> None:
    result = run(*args, code=1)
    assert (
        result.stderr
        == f"error: NotADurableQDatabase: no durableq database at {db}: create one with durableq init\n"
    )
    assert not db.exists()


@pytest.mark.sqlite_only("which commands may create the SQLite file")
def test_queue_create_and_send_may_create_the_file(run: Run, db: Path) -> None:
    run("queue", "create", "jobs")
    assert db.exists()
    other = db.with_name("other.db")
    run("--db", str(other), "send", "jobs", "x", code=1)  # the last --db wins; the queue is not there
    assert other.exists()


def test_the_database_comes_from_durableq_db_when_not_given(location: str) -> None:
    from click.testing import CliRunner
    from durableq.cli import main

    result = CliRunner().invoke(main, ["init", "--json"], env={"DURABLEQ_DB": location})
    assert result.exit_code == 0, result.output
    head = _head(location)
    assert json.loads(result.stdout) == {"path": location, "created": True, "revision": head}
    assert sql_rows(location, f"SELECT version_num FROM {VERSION_TABLE}") == [(head,)]  # made there


@pytest.mark.sqlite_only("an SQLite file of another application whose names take durableq's")
def test_a_file_whose_tables_take_durableqs_names_is_refused(run: Run, db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE durableq_queues (x)")
    result = run("db", "upgrade", code=1)
    assert result.stderr.startswith("error: NotADurableQDatabase: ")
    result = run("queue", "list", code=1)
    assert result.stderr.startswith("error: NotADurableQDatabase: ")


@pytest.mark.sqlite_only("a file that is not an SQLite database")
@pytest.mark.sqlite_only("an SQLite file of another application, shared")
def test_a_file_of_another_application_is_shared_and_downgraded_to_base_alone(run: Run, db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE mine (x)")
    run("db", "upgrade")
    run("queue", "create", "jobs")
    assert "downgraded from" in run("db", "downgrade", "base").stdout
    with sqlite3.connect(db) as conn:
        names = conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        assert names == [("mine",)]  # (SQLite's own sqlite_sequence may stay, empty)


def test_a_bad_schema_is_refused(run: Run, broker: durableq.Broker) -> None:
    result = run("--schema", "Bad-Name", "db", "current", code=1)
    assert result.stderr.startswith("error: InvalidParameterValue: schema ")  # its rule, or: PostgreSQL only


@pytest.mark.sqlite_only("a file that is not an SQLite database")
def test_a_file_that_is_not_sqlite_is_refused(run: Run, db: Path) -> None:
    db.write_text("just some text, long enough to have a header")
    result = run("init", code=1)
    assert result.stderr.startswith("error: DatabaseCorrupt: ")
    assert result.stderr.count("\n") == 1


@pytest.mark.sqlite_only("backup copies the SQLite file; refused on PostgreSQL (pg_dump's job)")
def test_backup_copies_the_database_in_use(run: Run, db: Path, tmp_path: Path) -> None:
    with durableq.open(db) as broker:  # open while the command runs, as a live producer would be
        broker.create_queue("jobs").send("kept")
        copy = tmp_path / "copy.db"
        report = json.loads(run("backup", str(copy), "--json").stdout)
        assert report == {"source": str(db), "backup": str(copy), "bytes": copy.stat().st_size}
        assert run("backup", str(tmp_path / "text.db")).stdout == (
            f"backed up {db} to {tmp_path / 'text.db'} ({(tmp_path / 'text.db').stat().st_size:,} bytes)\n"
        )
        refused = run("backup", str(copy), code=1)
        assert refused.stderr == (
            f"error: InvalidParameterValue: {copy} exists; "
            "a backup is written to a new file (remove it first)\n"
        )
    with durableq.open(copy) as restored:
        [peeked] = restored.get_queue("jobs").peek()
        assert peeked.body == "kept"
