"""Opening a file: creation, settings, refusing what is not ours, races between processes."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sqlite3
import stat
from pathlib import Path

import pytest

import durableq
from durableq.engines import migrate
from durableq.engines.fileformat import APPLICATION_ID
from durableq.engines.sqlite.database import Database


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_open_creates_a_wal_file_readable_by_its_owner_only(db_path: Path) -> None:
    with durableq.open(db_path) as broker:
        broker.create_queue("jobs").send("x")
        assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(f"{db_path}-wal").st_mode) == 0o600
        conn = sqlite3.connect(db_path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        conn.close()


@pytest.mark.parametrize(("durability", "level"), [("full", 2), ("normal", 1)])
def test_durability_sets_the_synchronous_level(db_path: Path, durability: str, level: int) -> None:
    with durableq.open(db_path, durability=durability) as broker:
        assert broker.durability == durability
        assert broker._rt.db.conn.execute("PRAGMA synchronous").fetchone()[0] == level


def test_default_durability_is_full(db_path: Path) -> None:
    with durableq.open(db_path) as broker:
        assert broker.durability == "full"


@pytest.mark.parametrize("bad", ["fast", "", None, 1])
def test_an_unknown_durability_is_refused(db_path: Path, bad: object) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="durability must be one of full, normal"):
        durableq.open(db_path, durability=bad)  # type: ignore[arg-type]
    assert not db_path.exists()


def test_a_file_that_is_not_sqlite_is_refused_and_left_untouched(db_path: Path) -> None:
    db_path.write_bytes(b"these are somebody's notes, not a database\n" * 100)
    before = _digest(db_path)
    with pytest.raises(durableq.DatabaseCorrupt, match="not an SQLite database"):
        durableq.open(db_path)
    assert _digest(db_path) == before
    assert not Path(f"{db_path}-wal").exists()


def test_an_sqlite_file_whose_tables_take_durableqs_names_is_refused_and_left_untouched(
    db_path: Path,
) -> None:
    # (A file of another application's own tables is shared: tests/test_shared_database.py.)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("CREATE TABLE durableq_queues (id INTEGER PRIMARY KEY, total REAL)")
    conn.commit()
    conn.close()
    before = _digest(db_path)
    with pytest.raises(
        durableq.NotADurableQDatabase, match=r"holds durableq_queues, which durableq did not make"
    ):
        durableq.open(db_path)
    assert _digest(db_path) == before


def test_a_file_from_a_newer_durableq_is_refused_and_left_untouched(db_path: Path) -> None:
    durableq.open(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE durableq_alembic_version SET version_num = '9999_from_the_future'")
    conn.commit()
    conn.close()
    before = _digest(db_path)
    with pytest.raises(durableq.SchemaVersionTooNew, match=r"9999_from_the_future.*upgrade durableq"):
        durableq.open(db_path)
    assert _digest(db_path) == before


def test_an_empty_file_is_initialised(db_path: Path) -> None:
    db_path.touch()
    with durableq.open(db_path) as broker:
        assert broker.create_queue("jobs").name == "jobs"


def test_a_missing_directory_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(durableq.DatabaseError, match="directory does not exist"):
        durableq.open(tmp_path / "nowhere" / "queue.db")


def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(durableq.DatabaseError, match="is a directory"):
        durableq.open(tmp_path)


def test_a_closed_broker_refuses_calls(target: str) -> None:
    broker = durableq.open(target)
    queue = broker.create_queue("jobs")
    broker.close()
    with pytest.raises(durableq.DatabaseError, match="closed"):
        queue.send("late")


def test_a_writer_holding_the_file_makes_calls_wait_then_fail_clearly(db_path: Path) -> None:
    with durableq.open(db_path, busy_timeout=0.2) as broker:
        queue = broker.create_queue("jobs")
        holder = sqlite3.connect(db_path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(durableq.DatabaseLocked, match=r"locked by another connection.*busy timeout"):
                queue.send("blocked")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        queue.send("after the lock")
        assert queue.stats().approximate_number_of_messages == 1


def _open_and_send(path: str, start: multiprocessing.synchronize.Event, index: int) -> None:
    start.wait()
    with durableq.open(path) as broker:
        broker.create_queue("shared").send(f"from process {index}")


def test_processes_opening_a_new_file_at_once_never_race(db_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    processes = [context.Process(target=_open_and_send, args=(str(db_path), start, i)) for i in range(6)]
    for process in processes:
        process.start()
    start.set()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    with durableq.open(db_path) as broker:
        queue = broker.get_queue("shared")
        bodies = {m.body for m in queue.receive(10)}
    assert bodies == {f"from process {i}" for i in range(6)}


@pytest.mark.parametrize("reading", [float("nan"), float("inf"), -1.0, 1e17, "now", None, True])
def test_a_clock_that_returns_no_usable_time_gives_a_clear_error(target: str, reading: object) -> None:
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs")
    with durableq.open(target, clock=lambda: reading) as broker:  # type: ignore[arg-type, return-value]
        queue = broker.get_queue("jobs")
        with pytest.raises(durableq.InvalidParameterValue, match="clock returned"):
            queue.send("x")
        with pytest.raises(durableq.InvalidParameterValue, match="clock returned"):
            queue.receive()


def test_a_migration_blocked_by_another_writer_raises_database_locked(db_path: Path) -> None:
    with durableq.open(db_path) as broker:
        broker.create_queue("jobs").send("kept")
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        migrate.downgrade(db, "0002")
    finally:
        db.close()
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
    try:
        with pytest.raises(durableq.DatabaseLocked, match="locked"):
            durableq.open(db_path, busy_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with durableq.open(db_path) as broker:  # nothing was harmed: the next open migrates it
        assert [m.body for m in broker.get_queue("jobs").receive()] == ["kept"]


def test_an_unknown_revision_is_a_clear_error(db_path: Path) -> None:
    durableq.open(db_path).close()
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        with pytest.raises(durableq.InvalidParameterValue, match=r"nope.*known revisions"):
            migrate.upgrade(db, "nope")
    finally:
        db.close()


def test_create_false_opens_only_a_current_database_and_writes_nothing(db_path: Path) -> None:
    with pytest.raises(durableq.NotADurableQDatabase, match=r"^no durableq database at .*durableq init$"):
        durableq.open(db_path, create=False)
    assert not db_path.exists()
    db_path.touch()
    with pytest.raises(durableq.NotADurableQDatabase, match=r"is an empty file, not a durableq database"):
        durableq.open(db_path, create=False)
    assert db_path.stat().st_size == 0 and sorted(db_path.parent.iterdir()) == [db_path]
    durableq.open(db_path).close()
    db = Database(db_path, durability="normal", busy_timeout=5)
    try:
        migrate.downgrade(db, "0007")
    finally:
        db.close()
    before = _digest(db_path)
    with pytest.raises(durableq.DatabaseError, match=r"schema revision '0007', older .*durableq db upgrade$"):
        durableq.open(db_path, create=False)
    assert _digest(db_path) == before
    durableq.open(db_path).close()  # the default migrates it
    with durableq.open(db_path, create=False) as broker:
        assert broker.list_queues() == []
