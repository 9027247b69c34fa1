"""Only `init`, `queue create`, `send` and `serve` (and `db upgrade`) create or migrate a database;
every other command refuses a missing path, an empty file, a PostgreSQL database without durableq's
tables and a file at an older schema revision, and leaves it as it was."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from durableq.cli import main

import durableq
from durableq import limits
from durableq.engines import migrate
from durableq.engines.fileformat import SCHEMA_REVISION
from durableq.engines.location import open_database
from tests import pgcluster
from tests.cli.conftest import Run

#: Commands that only read or change what a database holds (the queue `jobs`).
COMMANDS = [
    ("stats",),
    ("queue", "list"),
    ("queue", "show", "jobs"),
    ("receive", "jobs"),
    ("peek", "jobs"),
    ("events", "jobs"),
    ("audit",),
    ("queue", "purge", "jobs"),
    ("backup", "copy.db"),
]


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file of ``folder``: its size and mode."""
    return {p.name: (p.stat().st_size, stat.S_IMODE(p.stat().st_mode)) for p in folder.iterdir()}


@pytest.mark.sqlite_only("a path with no file")
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_file_is_refused_and_not_created(run: Run, db: Path, command: tuple[str, ...]) -> None:
    result = run(*command, code=1)
    assert result.stderr == (
        f"error: NotADurableQDatabase: no durableq database at {db}: create one with durableq init\n"
    )
    assert list(db.parent.iterdir()) == []


@pytest.mark.sqlite_only("an empty file")
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_an_empty_file_is_refused_and_left_untouched(run: Run, db: Path, command: tuple[str, ...]) -> None:
    db.touch(mode=0o640)
    db.chmod(0o640)
    before = _state(db.parent)
    result = run(*command, code=1)
    assert result.stderr == (
        f"error: NotADurableQDatabase: {db} is an empty file, not a durableq database: "
        "create one with durableq init\n"
    )
    assert _state(db.parent) == before == {db.name: (0, 0o640)}


@pytest.fixture
def empty(engine: str, db: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database without durableq's tables: a path with no file, or a new PostgreSQL database."""
    if engine == "sqlite":
        yield str(db)
        return
    cluster: pgcluster.Cluster = request.getfixturevalue("pg_cluster")
    name = pgcluster.create_database(cluster)
    try:
        yield cluster.url(name)
    finally:
        pgcluster.drop_database(cluster, name)


def test_a_database_without_durableq_tables_is_refused_and_left_so(empty: str, db: Path) -> None:
    def run(*args: str) -> Result:
        options = ["--db", empty, "--payload-dir", f"{db}.payloads"]
        return CliRunner().invoke(main, [*options, *args], catch_exceptions=False)

    for command in (("stats",), ("queue", "list"), ("receive", "jobs")):
        refused = run(*command)
        assert refused.exit_code == 1
        assert refused.stderr.startswith("error: NotADurableQDatabase: ")
        assert refused.stderr.endswith(": create one with durableq init\n")
    # None of them made the tables: the first command that may does.
    assert run("queue", "create", "jobs").exit_code == 0
    assert run("queue", "list").stdout == "jobs\n"


@pytest.mark.sqlite_only("an empty file")
def test_the_commands_that_create_take_an_empty_file(run: Run, db: Path) -> None:
    db.touch()
    for first, code in ((("init",), 0), (("queue", "create", "jobs"), 0), (("send", "jobs", "hi"), 1)):
        db.unlink()  # missing the first time round: none of the commands above made it
        db.touch()
        run(*first, code=code)  # send: migrated, then QueueDoesNotExist
        assert run("queue", "list").exit_code == 0


def _downgraded(location: str) -> str:
    """Put the database one revision back; returns that revision."""
    database = open_database(location, "normal", limits.DEFAULT_BUSY_TIMEOUT, create=False)
    try:
        older = next(r.down_revision for r in migrate.history(database) if r.revision == SCHEMA_REVISION)
        assert older is not None
        migrate.downgrade(database, older)
        return older
    finally:
        database.close()


def test_an_older_revision_is_refused_until_db_upgrade(
    run: Run, location: str, broker: durableq.Broker
) -> None:
    broker.create_queue("jobs")
    broker.close()
    older = _downgraded(location)
    result = run("stats", code=1)
    assert result.stderr.startswith(f"error: DatabaseError: {location}")
    assert result.stderr.endswith(
        f" is at schema revision {older!r}, older than this durableq's {SCHEMA_REVISION!r}: "
        "migrate it with durableq db upgrade\n"
    )
    assert run("db", "current").stdout.startswith(f"{older} ")  # stats left it at its revision
    assert run("db", "upgrade").stdout == f"upgraded from {older} to {SCHEMA_REVISION}\n"
    assert run("queue", "list").stdout == "jobs\n"
