"""Fair queues: a standard queue whose messages carry a group id serves the groups that are not noisy
first (``durableq/ops/fairness.py``); a queue without group ids claims as it always did."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq import SendEntry, limits
from durableq.engines.dialect import SQLITE
from durableq.engines.postgres.connection import Connection as PostgresConnection
from durableq.engines.sqlite.connection import SqliteConnection
from durableq.ops.claim_standard import _CLAIM_HEAD
from durableq.ops.fairness import NOISY_SQL
from tests.conftest import FakeClock, sql_rows

HOUR = 3_600
LEAST = limits.FAIR_NOISY_MIN_IN_FLIGHT


def _send(queue: durableq.Queue, prefix: str, count: int, group: str | None) -> None:
    """``count`` messages ``prefix0``, ``prefix1``, ... in group ``group``, in batches of ten."""
    for start in range(0, count, 10):
        entries = [
            SendEntry(str(i), f"{prefix}{i}", group_id=group) for i in range(start, min(start + 10, count))
        ]
        assert not queue.send_batch(entries).failed


def _hold(queue: durableq.Queue, count: int) -> list[durableq.Message]:
    """Receive ``count`` messages and keep them in flight for an hour."""
    held: list[durableq.Message] = []
    while len(held) < count:
        got = queue.receive(min(10, count - len(held)), visibility_timeout=HOUR)
        assert got, f"only {len(held)} of {count} came"
        held += got
    return held


def _bodies(messages: list[durableq.Message]) -> list[str]:
    return [m.body for m in messages]


def test_a_noisy_group_yields_to_a_quiet_groups_newer_message(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    _send(queue, "n", LEAST + 10, "noisy")
    assert {m.group_id for m in _hold(queue, LEAST + 1)} == {"noisy"}  # 31 in flight, all of them noisy
    clock.advance(1)
    queue.send("q0", group_id="quiet")  # newer than the noisy group's 9 visible messages
    queue.send("u0")  # no group: its own tenant, never noisy
    assert _bodies(queue.receive(1)) == ["q0"]
    # The quiet messages first, then the slots left filled from the noisy group, oldest first.
    assert _bodies(queue.receive(4)) == ["u0", "n31", "n32", "n33"]


def test_below_the_thresholds_the_order_is_oldest_first(queue: durableq.Queue, clock: FakeClock) -> None:
    # 29 in flight: one short of the least a noisy group holds.
    _send(queue, "n", LEAST + 10, "noisy")
    _hold(queue, LEAST - 1)
    clock.advance(1)
    queue.send("q0", group_id="quiet")
    assert _bodies(queue.receive(1)) == [f"n{LEAST - 1}"]


def test_a_group_is_noisy_past_a_tenth_of_the_messages_in_flight(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    # 270 of other tenants in flight beside the noisy group's 30: it holds exactly 10 %, not more.
    others = 300 - LEAST
    _send(queue, "o", others, None)
    _hold(queue, others)
    clock.advance(1)
    _send(queue, "n", LEAST + 10, "noisy")
    _hold(queue, LEAST)
    clock.advance(1)
    queue.send("q0", group_id="quiet")
    assert _bodies(queue.receive(1)) == [f"n{LEAST}"]  # 30 of 300: oldest first
    assert _bodies(queue.receive(1)) == ["q0"]  # 31 of 301: more than a tenth, so noisy


def test_when_only_noisy_groups_have_visible_messages_they_are_served(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    _send(queue, "a", LEAST + 5, "a")
    _send(queue, "b", LEAST + 5, "b")
    _hold(queue, 2 * LEAST + 5)  # a's 35 and b's first 30: both noisy
    assert _bodies(queue.receive(10)) == ["b30", "b31", "b32", "b33", "b34"]
    assert queue.receive(10) == []  # nothing visible is left: nothing is made up


def test_messages_without_a_group_are_never_noisy(queue: durableq.Queue, clock: FakeClock) -> None:
    queue.send("g0", group_id="g")  # the queue has seen a group id: its receives are fair
    _send(queue, "u", LEAST + 10, None)
    _hold(queue, LEAST + 2)  # g0 and 31 without a group in flight
    clock.advance(1)
    queue.send("q0", group_id="quiet")
    assert _bodies(queue.receive(1)) == [f"u{LEAST + 1}"]  # oldest first: no noisy group


def test_a_virtual_queue_is_fair_too(broker: durableq.Broker, clock: FakeClock) -> None:
    host = broker.create_queue("host")
    tenant = host.virtual_queue("worker-1")
    for i in range(LEAST + 5):
        tenant.send(f"n{i}", group_id="noisy")
    assert (
        len(tenant.receive(10, visibility_timeout=HOUR) + tenant.receive(10, visibility_timeout=HOUR)) == 20
    )
    assert len(tenant.receive(10, visibility_timeout=HOUR) + tenant.receive(1, visibility_timeout=HOUR)) == 11
    clock.advance(1)
    tenant.send("q0", group_id="quiet")
    assert _bodies(tenant.receive(2)) == ["q0", "n31"]
    assert host.receive(10) == []  # the host's own messages are apart


def test_the_first_message_with_a_group_id_makes_the_queue_fair(
    broker: durableq.Broker, target: str, clock: FakeClock
) -> None:
    def grouped(name: str) -> bool:
        return bool(sql_rows(target, "SELECT grouped FROM durableq_queues WHERE name = ?", name)[0][0])

    plain, single, batch = (broker.create_queue(n) for n in ("plain", "single", "batch"))
    plain.send("x")
    plain.send_batch([SendEntry("1", "y")])
    single.send("x", group_id="t")
    batch.send_batch([SendEntry("1", "y"), SendEntry("2", "z", group_id="t")])
    assert [grouped(n) for n in ("plain", "single", "batch")] == [False, True, True]
    # Messages with group ids moved to a dead-letter queue make it fair as well.
    dead = broker.create_queue("dead")
    single.set_attributes(redrive_policy=durableq.RedrivePolicy("dead", 1))
    assert len(single.receive(visibility_timeout=1)) == 1
    clock.advance(2)
    assert single.receive() == []  # received once already: it moves
    assert [m.group_id for m in dead.receive()] == ["t"] and grouped("dead")


def test_a_group_id_sent_in_a_transaction_makes_the_queue_fair_when_it_commits(
    broker: durableq.Broker, target: str
) -> None:
    def grouped() -> bool:
        return bool(sql_rows(target, "SELECT grouped FROM durableq_queues WHERE name = 'jobs'")[0][0])

    queue = broker.create_queue("jobs")
    with pytest.raises(RuntimeError), broker.transaction() as tx:
        queue.send("x", group_id="t", transaction=tx)
        raise RuntimeError("rolled back")
    assert not grouped()
    with broker.transaction() as tx:
        queue.send_batch([SendEntry("1", "y", group_id="t")], transaction=tx)
    assert grouped()


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement durableq's own connections run (on either engine), while the test runs."""
    seen: list[str] = []

    def counting(cls: type) -> None:
        run = cls.execute

        def execute(self: Any, sql: str, *args: Any) -> Any:
            seen.append(sql)
            return run(self, sql, *args)

        monkeypatch.setattr(cls, "execute", execute)

    counting(SqliteConnection)
    counting(PostgresConnection)
    yield seen


def test_a_queue_without_group_ids_pays_nothing_on_receive(
    broker: durableq.Broker, clock: FakeClock, statements: list[str]
) -> None:
    plain, fair = broker.create_queue("plain"), broker.create_queue("fair")
    _send(plain, "p", 20, None)
    _send(fair, "f", 20, "tenant")
    plain.receive(1), fair.receive(1)  # the catalog has both rows; nothing else is pending
    del statements[:]
    assert len(plain.receive(10)) == 10
    claims = [sql for sql in statements if "durableq_messages" in sql]
    assert len(claims) == 1 and "group_id" not in claims[0].split("RETURNING")[0], statements
    del statements[:]
    assert len(fair.receive(10)) == 10  # no noisy group: the noisy groups looked for, then one claim
    claims = [sql for sql in statements if "durableq_messages" in sql]
    assert len(claims) == 2 and "GROUP BY group_id" in claims[0] and "RETURNING" in claims[1], statements


def test_the_fair_claim_reads_the_visible_index_never_every_grouped_row(db_path: Path) -> None:
    # SQLite's plan.  The noisy groups come from the range of messages in flight, the quiet ones from
    # the head of the visible ones: neither walks the queue's grouped messages through another index.
    with durableq.open(db_path, durability="normal") as broker:
        broker.create_queue("jobs").send("x", group_id="g")
    params = {"virtual": None, "queue_id": 1, "now": 0, "limit": 10, "timeout": None, "cap": 10}
    quiet = _CLAIM_HEAD[SQLITE][False, "quiet"]
    plan = []
    with closing(sqlite3.connect(db_path)) as conn:
        for statement in (NOISY_SQL[SQLITE], quiet):
            explained = conn.execute(
                f"EXPLAIN QUERY PLAN {statement}", {**params, "sealed": False, "noisy": '["g"]'}
            )
            plan += [row[3] for row in explained]
    # (A bare "SEARCH durableq_messages" is the min or max of the row ids: the in-flight room's bound.)
    reads = [step for step in plan if step.startswith("SEARCH durableq_messages USING")]
    assert len(reads) >= 4 and all(
        "durableq_ix_messages_visible" in step or "PRIMARY KEY" in step for step in reads
    ), plan
