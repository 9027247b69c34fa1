"""init, the db migration commands, --db / DURABLEQ_DB, and refusing a missing file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import durableq
from durableq.engines import migrate
from durableq.engines.sqlite import Database

from .conftest import Run


def _head(db: Path) -> str:
    database = Database(db, durability="normal", busy_timeout=1.0)
    try:
        return next(r.revision for r in migrate.history(database) if r.is_head)
    finally:
        database.close()


def test_init_creates_and_migrates_the_file(run: Run, db: Path) -> None:
    result = run("init", "--json")
    report = json.loads(result.stdout)
    assert report == {"path": str(db), "created": True, "revision": _head(db)}
    with durableq.open(db) as broker:
        assert broker.list_queues() == []
    again = json.loads(run("init", "--json").stdout)
    assert again["created"] is False
    assert "schema revision" in run("init").stdout


def test_db_current_history_and_upgrade(run: Run, db: Path) -> None:
    run("init")
    head = _head(db)
    assert json.loads(run("db", "current", "--json").stdout) == {"revision": head, "head": head}
    assert f"{head} (head)" in run("db", "current").stdout
    history = json.loads(run("db", "history", "--json").stdout)
    assert history[0]["revision"] == head and history[0]["is_head"] is True
    assert head in run("db", "history").stdout
    assert json.loads(run("db", "upgrade", "--json").stdout) == {"from": head, "to": head}
    assert f"already at {head}" in run("db", "upgrade").stdout


def test_db_upgrade_migrates_an_empty_file(run: Run, db: Path) -> None:
    db.touch()
    assert json.loads(run("db", "current", "--json").stdout)["revision"] is None
    assert "not migrated" in run("db", "current").stdout
    report = json.loads(run("db", "upgrade", "--json").stdout)
    assert report == {"from": None, "to": _head(db)}


def test_db_history_needs_no_file(run: Run, db: Path) -> None:
    run("db", "history")
    assert not db.exists()


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
def test_a_missing_file_is_an_error_not_a_new_file(run: Run, db: Path, args: tuple[str, ...]) -> None:
    result = run(*args, code=1)
    assert (
        result.stderr
        == f"error: DatabaseError: no durableq database at {db}; run `durableq init` or pass --db\n"
    )
    assert not db.exists()


def test_queue_create_and_send_may_create_the_file(run: Run, db: Path) -> None:
    run("queue", "create", "jobs")
    assert db.exists()
    other = db.with_name("other.db")
    run("--db", str(other), "send", "jobs", "x", code=1)  # the last --db wins; the queue is not there
    assert other.exists()


def test_the_database_comes_from_durableq_db_when_not_given(run: Run, tmp_path: Path) -> None:
    from click.testing import CliRunner
    from durableq.cli import main

    path = tmp_path / "from-env.db"
    result = CliRunner().invoke(main, ["init", "--json"], env={"DURABLEQ_DB": str(path)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["path"] == str(path)
    assert path.exists()


def test_a_file_of_another_application_is_refused(run: Run, db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE mine (x)")
    result = run("db", "upgrade", code=1)
    assert result.stderr.startswith("error: NotADurableQDatabase: ")
    result = run("queue", "list", code=1)
    assert result.stderr.startswith("error: NotADurableQDatabase: ")


def test_a_file_that_is_not_sqlite_is_refused(run: Run, db: Path) -> None:
    db.write_text("just some text, long enough to have a header")
    result = run("init", code=1)
    assert result.stderr.startswith("error: DatabaseCorrupt: ")
    assert result.stderr.count("\n") == 1


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
