"""The engine contract: what the operations may count on from ``durableq.engines.base.Database`` and its
connections, pinned once and run on every engine (``[sqlite]``, ``[postgresql]``), as riverdriver's
driver tests are.  Where engines differ, the test asks the engine's named property (never its type)
and checks that the behaviour is the one the property promises.

- the dialect: every fragment of SQL that differs between the engines (``durableq.engines.dialect``)
  does on its engine what its contract says;
- the kinds of transaction: ``write()`` runs alone, ``change()`` runs beside other changes exactly
  where ``concurrent_changes`` says, and ``conn.one_write()`` commits its statements as one;
- event-id visibility: a ``settled_read()`` never shows an id while a lower one can still commit;
- the database's file: ``path`` (``location.file_of`` before opening)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

import durableq
from durableq.engines.base import Connection, Database
from durableq.engines.dialect import DIALECTS, POSTGRES, SQLITE, encode_ids, for_each_dialect, named
from durableq.engines.fileformat import VERSION_TABLE
from durableq.engines.location import file_of
from durableq.ops.receipts import parse

from .conftest import FakeClock, sql_rows, until

T = TypeVar("T")

#: A few rows to pick from, in the SQL both engines share.
_NUMBERS = "(SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT 3) AS numbers"
_WORDS = "(SELECT 'a' AS w UNION ALL SELECT 'b.c' UNION ALL SELECT 'd') AS words"
#: How long a write waits for a lock before DatabaseLocked, in the tests that hold one.
_BUSY = 0.5
#: An event of a queue (its id, then the message id), written by hand.
_EVENT = (
    "INSERT INTO durableq_message_events (queue_id, at, event, message_id, receive_count) "
    "VALUES (?, 0, 'sent', ?, 0)"
)


@pytest.fixture
def db(broker: durableq.Broker) -> Iterator[Database]:
    """The engine's database under a broker (its schema made), with the queue ``jobs``."""
    broker.create_queue("jobs")
    yield broker._rt.db


@pytest.fixture
def impatient(target: str, clock: FakeClock) -> Iterator[Database]:
    """As :func:`db`, its writes waiting only :data:`_BUSY` for a lock another holds (durability
    "normal": no group commit, so a write of this process meets the lock itself)."""
    with durableq.open(target, clock=clock, durability="normal", busy_timeout=_BUSY) as broker:
        broker.create_queue("jobs")
        broker.get_queue("jobs").send_batch([durableq.SendEntry(str(i), f"m{i}") for i in range(3)])
        yield broker._rt.db


@contextmanager
def several(db: Database) -> Iterator[Connection]:
    """A change of several statements that commit as one."""
    with db.change() as conn, conn.one_write():
        yield conn


@contextmanager
def held_open(
    block: Callable[[], AbstractContextManager[Connection]], work: Callable[[Connection], T]
) -> Iterator[T]:
    """Run ``work(conn)`` inside ``block()`` in a thread of its own and keep the block open (nothing of
    it committed) until the with-statement ends; yields what ``work`` returned."""
    ready, release = threading.Event(), threading.Event()
    done: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with block() as conn:
                done.append(work(conn))
                ready.set()
                release.wait(60)
        except BaseException as exc:  # noqa: BLE001 - reported in the test's thread
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(30) and not errors, errors
    try:
        yield done[0]
    finally:
        release.set()
        thread.join(60)
    assert not thread.is_alive() and not errors, errors


def _event(conn: Connection, message_id: str) -> int:
    """Write an event of ``jobs``; its id."""
    conn.execute(_EVENT, (_jobs_id(conn), message_id))
    (event_id,) = conn.execute(
        "SELECT event_id FROM durableq_message_events WHERE message_id = ?", (message_id,)
    ).fetchone()
    return int(event_id)


def _jobs_id(conn: Connection) -> int:
    return int(conn.execute("SELECT id FROM durableq_queues WHERE name = 'jobs'").fetchone()[0])


def _claim(conn: Connection) -> list[int]:
    """Claim the first message of ``jobs`` not being claimed right now, as a receive does."""
    picker = (
        f"SELECT id FROM durableq_messages WHERE queue_id = :q ORDER BY id LIMIT 1 {conn.dialect.skip_locked}"
    )
    claim = (
        f"UPDATE durableq_messages SET receive_count = receive_count + 1 WHERE id IN ({picker}) RETURNING id"
    )
    return [row[0] for row in conn.execute(claim, {"q": _jobs_id(conn)})]


def _events(target: str) -> list[str]:
    """The message ids of the committed events, read outside durableq."""
    return [
        row[0] for row in sql_rows(target, "SELECT message_id FROM durableq_message_events ORDER BY event_id")
    ]


def _folder(tmp_path: Path) -> Path:
    """Where snapshots go in a test (beside the test's database, not among its files)."""
    folder = tmp_path / "snapshots"
    folder.mkdir(exist_ok=True)
    return folder


def _waits_for_a_lock(target: str) -> bool:
    """Does a connection to ``target`` wait for a lock now?  (An observation for the tests that hold
    one; SQLite's waits are inside its busy handler, out of sight: always False.)"""
    if not target.startswith("postgresql://"):
        return False
    return bool(sql_rows(target, "SELECT count(*) FROM pg_locks WHERE NOT granted")[0][0])


# -- the dialect ------------------------------------------------------------------------------


def test_each_engine_speaks_its_own_dialect(db: Database, engine: str) -> None:
    assert db.dialect is named(engine) and db.dialect.name == engine
    with db.statement() as conn:
        assert conn.dialect is db.dialect
    with db.change() as conn:
        assert conn.dialect is db.dialect
    assert {d.name for d in DIALECTS} == {"sqlite", "postgresql"} and named("sqlite") is SQLITE


def test_a_statement_built_for_each_dialect_has_each_engine_s_fragments() -> None:
    built = for_each_dialect(lambda d: f"SELECT 1 FROM t {d.skip_locked}")
    assert set(built) == set(DIALECTS)
    assert built[POSTGRES].endswith("FOR UPDATE SKIP LOCKED") and "SKIP LOCKED */" in built[SQLITE]


def test_in_ids_is_the_set_of_the_ids_bound(db: Database) -> None:
    with db.statement() as conn:
        sql = f"SELECT x FROM {_NUMBERS} WHERE x IN {conn.dialect.in_ids(':ids')} ORDER BY x"
        assert [row[0] for row in conn.execute(sql, {"ids": encode_ids([3, 1, 7])})] == [1, 3]
        assert conn.execute(sql, {"ids": encode_ids([])}).fetchall() == []


def test_in_texts_is_the_set_of_the_strings_bound(db: Database) -> None:
    with db.statement() as conn:
        sql = f"SELECT w FROM {_WORDS} WHERE w IN {conn.dialect.in_texts(':words')} ORDER BY w"
        assert [row[0] for row in conn.execute(sql, {"words": encode_ids(["b.c", "d", "z"])})] == ["b.c", "d"]


def test_byte_length_counts_utf8_bytes(db: Database) -> None:
    with db.statement() as conn:
        sql = f"SELECT {conn.dialect.byte_length('t')} FROM (SELECT CAST(:t AS TEXT) AS t) AS given"
        assert conn.execute(sql, {"t": "aé€😀"}).fetchone()[0] == 1 + 2 + 3 + 4


def test_random_hex_is_eight_fresh_random_bytes(db: Database) -> None:
    with db.statement() as conn:
        drawn = [conn.execute(f"SELECT {conn.dialect.random_hex}").fetchone()[0] for _ in range(3)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", value) for value in drawn) and len(set(drawn)) == 3


def test_new_handle_is_a_receipt_handle_of_the_row(db: Database) -> None:
    row = "(SELECT 7 AS queue_id, 9 AS id, '0123456789abcdef' AS secret) AS m"
    with db.statement() as conn:
        first, second = (
            conn.execute(f"SELECT {conn.dialect.new_handle} FROM {row}").fetchone()[0] for _ in "ab"
        )
    receipt = parse(first)
    assert (receipt.queue_id, receipt.row_id, receipt.secret) == (7, 9, "0123456789abcdef")
    assert second != first and parse(second)[1:] == receipt[1:]  # a fresh nonce each time


def test_the_catalog_counter_is_read_and_set(db: Database) -> None:
    with db.statement() as conn:
        (before,) = conn.execute(conn.dialect.catalog_version).fetchone()
    with db.write() as conn:
        conn.execute(conn.dialect.catalog_bump(before + 5))
    with db.statement() as conn:
        assert conn.execute(conn.dialect.catalog_version).fetchone()[0] == before + 5


def test_the_index_hint_and_the_row_picker_are_valid_sql(db: Database, broker: durableq.Broker) -> None:
    broker.get_queue("jobs").send("x")
    with db.statement() as conn:
        hint = conn.dialect.indexed_by("durableq_ix_messages_visible")
        hinted = f"SELECT count(*) FROM durableq_messages {hint}"
        assert conn.execute(hinted).fetchone()[0] == 1
    with db.change() as conn:
        picked = f"SELECT id FROM durableq_messages ORDER BY id LIMIT 1 {conn.dialect.skip_locked}"
        assert len(conn.execute(picked).fetchall()) == 1


# -- the kinds of transaction -----------------------------------------------------------------


def test_one_write_commits_its_statements_together(db: Database, target: str) -> None:
    with db.change() as conn, conn.one_write():
        _event(conn, "first")
        _event(conn, "second")
    assert _events(target) == ["first", "second"]


def test_one_write_that_raises_leaves_none_of_its_statements(db: Database, target: str) -> None:
    with pytest.raises(ZeroDivisionError), db.change() as conn, conn.one_write():
        _event(conn, "first")
        _event(conn, "second")
        raise ZeroDivisionError
    assert _events(target) == []
    with db.change() as conn:  # and the connection goes on
        _event(conn, "after")
    assert _events(target) == ["after"]


def test_one_write_inside_a_write_is_part_of_it(db: Database, target: str) -> None:
    with pytest.raises(ZeroDivisionError), db.write() as conn:
        _event(conn, "before")
        with conn.one_write():
            _event(conn, "inside")
        raise ZeroDivisionError
    assert _events(target) == []


def test_changes_run_side_by_side_exactly_where_the_engine_says(impatient: Database, target: str) -> None:
    db = impatient
    with held_open(lambda: several(db), lambda conn: _event(conn, "held")):
        if db.concurrent_changes:
            with db.change() as conn:
                _event(conn, "beside")  # commits while the held change is still open
            assert _events(target) == ["beside"]
        else:
            with pytest.raises(durableq.DatabaseLocked), db.change() as conn:
                _event(conn, "beside")  # one writer at a time: it waits, then gives up
    assert sorted(_events(target)) == (["beside", "held"] if db.concurrent_changes else ["held"])


def test_claims_pass_over_what_another_change_is_claiming(impatient: Database) -> None:
    db = impatient
    with held_open(lambda: several(db), _claim) as first:
        if db.concurrent_changes:
            with db.change() as conn:
                second = _claim(conn)  # not waiting for the held claim's row: the next one
            assert len(first) == len(second) == 1 and second != first
        else:
            with pytest.raises(durableq.DatabaseLocked), db.change() as conn:
                _claim(conn)


@pytest.mark.parametrize("held", ["change", "write"])
def test_a_write_runs_alone(impatient: Database, target: str, held: str) -> None:
    """Beside a change or another write under way, a write waits (and here gives up): what it reads
    stays true until it commits."""
    db = impatient
    block = (lambda: several(db)) if held == "change" else db.write
    with held_open(block, lambda conn: _event(conn, "held")):
        with pytest.raises(durableq.DatabaseLocked), db.write() as conn:
            _event(conn, "alone")
        if held == "write":  # nor does a change run beside a write
            with pytest.raises(durableq.DatabaseLocked), db.change() as conn:
                _event(conn, "change")
    assert _events(target) == ["held"]


# -- event-id visibility -------------------------------------------------------------------------


def _settled_read(db: Database, _: Path) -> list[int]:
    with db.settled_read() as conn:
        return [row[0] for row in conn.execute("SELECT event_id FROM durableq_message_events")]


def _exported(db: Database, folder: Path) -> list[int]:
    snapshot = db.export_snapshot(lambda: 0.0, folder)
    try:
        return [row[0] for row in snapshot.query("SELECT event_id FROM durableq_message_events")]
    finally:
        snapshot.close()


#: The readers that resume after an event id: each must read a settled snapshot.
SETTLED = {"settled_read": _settled_read, "export_snapshot": _exported}


@pytest.mark.parametrize("read", SETTLED.values(), ids=SETTLED.keys())
def test_a_settled_snapshot_never_shows_an_id_above_one_still_to_commit(
    target: str, clock: FakeClock, tmp_path: Path, read: Callable[[Database, Path], list[int]]
) -> None:
    with durableq.open(target, clock=clock, durability="normal", busy_timeout=60) as broker:
        broker.create_queue("jobs")
        db = broker._rt.db
        seen: list[int] = []
        with held_open(lambda: several(db), lambda conn: _event(conn, "held")) as held_id:
            if db.concurrent_changes:
                with db.change() as conn:
                    later = _event(conn, "later")  # a higher id, committed first
                assert later > held_id and _events(target) == ["later"]
            reader = threading.Thread(target=lambda: seen.extend(read(db, _folder(tmp_path))))
            reader.start()
            # It reads at once (and must not show the later id without the held one), or waits for
            # the writes under way.
            until(lambda: not reader.is_alive() or _waits_for_a_lock(target), "the reader read, or waits")
        reader.join(60)
        committed = sorted(_settled_read(db, tmp_path))
    assert not reader.is_alive() and held_id in committed
    assert sorted(seen) == [i for i in committed if i <= max(seen, default=0)]  # no gap below its highest


# -- the snapshot for readers outside durableq --------------------------------------------------


def test_an_exported_snapshot_holds_still_while_writes_commit(
    broker: durableq.Broker, db: Database, clock: FakeClock, tmp_path: Path
) -> None:
    jobs = broker.get_queue("jobs")
    jobs.send_batch([durableq.SendEntry(str(i), "before") for i in range(2)])
    snapshot = db.export_snapshot(clock, _folder(tmp_path))
    try:
        jobs.send("after")
        jobs.receive(max_messages=10)
        count = "SELECT count(*) FROM durableq_messages WHERE body = :body AND receive_count = :n"
        assert snapshot.query(count, {"body": "before", "n": 0}) == [(2,)]
        assert snapshot.query("SELECT count(*) FROM durableq_messages") == [(2,)]
        assert snapshot.now_ms == int(clock() * 1000) and snapshot.dialect is db.dialect
        assert snapshot.source == (db.path or db.name) and (snapshot.file is None) == (db.path is None)
        url, properties = snapshot.jdbc()
        assert url.startswith(f"jdbc:{db.dialect.name}:") and "driver" not in properties
    finally:
        snapshot.close()
    assert snapshot.closed
    assert list(_folder(tmp_path).iterdir()) == []  # a copy is removed with its folder


def test_a_database_of_another_schema_revision_is_not_exported(
    db: Database, target: str, clock: FakeClock, tmp_path: Path
) -> None:
    table = VERSION_TABLE
    with db.write() as conn:
        conn.execute(f"UPDATE {table} SET version_num = '0001'")
    with pytest.raises(durableq.DatabaseError, match="schema revision '0001'"):
        db.export_snapshot(clock, _folder(tmp_path))
    assert list(_folder(tmp_path).iterdir()) == []


# -- the database's file ------------------------------------------------------------------------


def test_the_database_says_its_file(db: Database, target: str, engine: str) -> None:
    assert db.path == file_of(target)
    assert (db.path == Path(target)) if engine == "sqlite" else (db.path is None)
