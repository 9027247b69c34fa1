"""The engine contract: what the operations may count on from ``durableq.engines.base.Database`` and its
connections, pinned once and run on every engine (``[sqlite]``, ``[postgresql]``), as riverdriver's
driver tests are.  Where engines differ, the test asks the engine's named property (never its type)
and checks that the behaviour is the one the property promises.

The dialect: every fragment of SQL that differs between the engines (``durableq.engines.dialect``)
does on its engine what its contract says."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

import durableq
from durableq.engines.base import Database
from durableq.engines.dialect import DIALECTS, POSTGRES, SQLITE, encode_ids, for_each_dialect, named
from durableq.ops.receipts import parse

#: A few rows to pick from, in the SQL both engines share.
_NUMBERS = "(SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT 3) AS numbers"
_WORDS = "(SELECT 'a' AS w UNION ALL SELECT 'b.c' UNION ALL SELECT 'd') AS words"


@pytest.fixture
def db(broker: durableq.Broker) -> Iterator[Database]:
    """The engine's database under a broker (its schema made), with the queue ``jobs``."""
    broker.create_queue("jobs")
    yield broker._rt.db


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
        hinted = f"SELECT count(*) FROM messages {conn.dialect.indexed_by('ix_messages_visible')}"
        assert conn.execute(hinted).fetchone()[0] == 1
    with db.change() as conn:
        picked = f"SELECT id FROM messages ORDER BY id LIMIT 1 {conn.dialect.skip_locked}"
        assert len(conn.execute(picked).fetchall()) == 1
