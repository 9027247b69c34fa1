"""Group commit: writes of one process that wait behind a transaction share the next one.

Each test lines the writes under test up behind a write that holds the gate
(see tests/grouping.py): everything in line forms one batch, deterministically.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq
from tests.conftest import FakeClock
from tests.grouping import Calls, db_of, gate_held, line_up


@pytest.fixture
def broker(db_path: Path, clock: FakeClock) -> Iterator[durableq.Broker]:
    """Group commit is for durability "full", where every commit waits for an fsync."""
    with durableq.open(db_path, clock=clock, durability="full") as opened:
        yield opened


def test_writes_that_wait_share_one_transaction_and_each_is_committed_when_it_returns(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    before = db.group_stats.batches
    calls = Calls()

    def send_and_look(n: int) -> bool:
        observer = sqlite3.connect(db_path)  # another connection: sees only what is committed
        try:
            sent = queue.send(f"m{n}")
            row = observer.execute("SELECT 1 FROM durableq_messages WHERE message_id = ?", (sent.message_id,))
            return row.fetchone() is not None
        finally:
            observer.close()

    with gate_held(db):
        line_up(db, calls, {f"send {n}": lambda n=n: send_and_look(n) for n in range(6)})  # type: ignore[misc]
    outcomes = calls.join()
    assert outcomes == {f"send {n}": True for n in range(6)}, "a send returned before its commit"
    assert db.group_stats.batches == before + 1
    received = queue.receive(10)
    assert sorted(m.body for m in received) == [f"m{n}" for n in range(6)]


def test_one_writes_error_fails_only_that_write(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    sent = queue.send("to delete")
    (message,) = queue.receive(1)
    calls = Calls()

    def half_done_then_fails() -> None:
        with db.write() as conn:
            conn.execute("UPDATE durableq_queues SET delay_seconds = 7 WHERE name = 'jobs'")
            raise ValueError("the caller's own mistake")

    with gate_held(db):
        line_up(
            db,
            calls,
            {
                "send": lambda: queue.send("kept"),
                "fails": half_done_then_fails,
                "bad handle": lambda: queue.delete("not a receipt handle"),
                "delete": lambda: queue.delete(message.receipt_handle),
            },
        )
    outcomes = calls.join()
    assert isinstance(outcomes["fails"], ValueError)
    assert isinstance(outcomes["bad handle"], durableq.ReceiptHandleIsInvalid)
    assert outcomes["delete"] is None and outcomes["send"].md5_of_body
    assert queue.attributes()["delay_seconds"] == 0, "the failed write's half was committed"
    assert [m.body for m in queue.peek()] == ["kept"], sent


def test_a_driver_error_in_a_grouped_write_is_translated_and_its_own(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls = Calls()

    def duplicate_queue_row() -> None:
        with db.write() as conn:
            conn.execute(
                "INSERT INTO durableq_queues SELECT * FROM durableq_queues WHERE name = 'jobs'"
            )  # primary key taken

    with gate_held(db):
        line_up(
            db,
            calls,
            {"a": lambda: queue.send("a"), "dup": duplicate_queue_row, "b": lambda: queue.send("b")},
        )
    outcomes = calls.join()
    assert isinstance(outcomes["dup"], durableq.DatabaseError), outcomes["dup"]
    assert "UNIQUE" in str(outcomes["dup"])
    assert sorted(m.body for m in queue.peek()) == ["a", "b"]


def test_a_batch_that_cannot_lock_the_file_fails_at_once_and_frees_the_gate(db_path: Path) -> None:
    with durableq.open(db_path, busy_timeout=0.2) as broker:
        queue = broker.create_queue("jobs")
        db = db_of(broker)
        other = sqlite3.connect(db_path, isolation_level=None)
        calls = Calls()
        with gate_held(db, transaction=False):  # holds the gate, not the file
            other.execute("BEGIN IMMEDIATE")  # another process's writer holds the file
            line_up(db, calls, {f"send {n}": lambda n=n: queue.send(f"m{n}") for n in range(4)})  # type: ignore[misc]
        outcomes = calls.join()
        other.execute("ROLLBACK")
        assert all(isinstance(o, durableq.DatabaseLocked) for o in outcomes.values()), outcomes
        queue.send("after")  # the gate is free again
        assert [m.body for m in queue.peek()] == ["after"]


def test_threads_sending_receiving_and_deleting_lose_and_repeat_nothing(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs", visibility_timeout=600)
    per_thread, producers = 150, 4
    received: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def produce(index: int) -> None:
        for n in range(per_thread):
            if n % 5 == 0:
                queue.send_batch([durableq.SendEntry(str(i), f"{index}.{n}.{i}") for i in range(3)])
            else:
                queue.send(f"{index}.{n}")

    def consume() -> None:
        while True:
            messages = queue.receive(10)
            if not messages:
                if done.is_set() and not queue.receive(10, visibility_timeout=0):
                    return
                continue
            for m in messages[1:]:
                queue.delete(m.receipt_handle)
            queue.change_visibility(messages[0].receipt_handle, 600)
            queue.delete_batch([messages[0].receipt_handle])
            with lock:
                received.extend(m.body for m in messages)

    producing = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    consuming = [threading.Thread(target=consume) for _ in range(3)]
    for thread in producing + consuming:
        thread.start()
    for thread in producing:
        thread.join()
    done.set()
    for thread in consuming:
        thread.join()
    expected = {
        body
        for index in range(producers)
        for n in range(per_thread)
        for body in ([f"{index}.{n}.{i}" for i in range(3)] if n % 5 == 0 else [f"{index}.{n}"])
    }
    assert sorted(received) == sorted(expected)
    assert queue.stats().approximate_number_of_messages == 0


def test_at_durability_normal_writes_are_not_grouped(db_path: Path) -> None:
    with durableq.open(db_path, durability="normal") as broker:
        queue = broker.create_queue("jobs")
        db = db_of(broker)
        threads = [threading.Thread(target=lambda: [queue.send("m") for _ in range(50)]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert db.group_stats == type(db.group_stats)()  # the gate was never used
        assert queue.stats().approximate_number_of_messages == 200
