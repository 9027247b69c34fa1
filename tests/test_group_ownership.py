"""A batch of group commit belongs to the gate, not to whichever thread started it: a member
that fails, a member's reads, a member's thread ending, a fork, an interrupt, closing the broker,
touch no other member's work, and leave no member waiting.

Found in use (issue 27): the batch's transaction ran on its first member's own connection, so
that member's next read began a transaction on it, failed, and rolled back everyone's work,
after which the last member's COMMIT found nothing to commit and every member returned
"success"; and a first member's thread that ended closed the connection under the others
(SIGSEGV, or every writer blocked forever).  The in-process tests below make each interleaving
happen deterministically (see tests/grouping.py); the randomised ones run in a process of their
own (tests/grouped_writers.py), so that a crash or a hang fails the test instead of the run.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq.engines import forks
from durableq.engines.sqlite import group
from tests.conftest import FakeClock, threads_inside, until
from tests.grouped_writers import WATCHDOG
from tests.grouping import Blocking, Calls, db_of, gate_held, line_up, wait_child

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def broker(db_path: Path, clock: FakeClock) -> Iterator[durableq.Broker]:
    """Group commit is for durability "full", where every commit waits for an fsync."""
    with durableq.open(db_path, clock=clock, durability="full") as opened:
        yield opened


def _stored(path: Path) -> set[str]:
    """The message ids in the file, as a new process would find them (opening it recovers the WAL)."""
    durableq.open(path).close()
    conn = sqlite3.connect(path)
    try:
        return {message_id for (message_id,) in conn.execute("SELECT message_id FROM durableq_messages")}
    finally:
        conn.close()


def test_a_member_that_failed_reads_what_is_committed_and_its_batch_loses_nothing(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls, blocking, finish = Calls(), Blocking(db, "jobs", 3), threading.Event()
    seen: dict[str, object] = {}

    def delay_now() -> int:
        with db.statement() as conn:
            delay: int = conn.execute(
                "SELECT delay_seconds FROM durableq_queues WHERE name = 'jobs'"
            ).fetchone()[0]
            return delay

    def bad_delete_then_read() -> None:
        try:
            queue.delete("bad handle")
        except durableq.ReceiptHandleIsInvalid:
            pass
        blocking.inside.wait()  # the batch is open: it holds the send below and the new delay
        reads = {"statement": delay_now, "peek": queue.peek}  # autocommit, and a read transaction
        for name, read in reads.items():
            try:
                seen[name] = read()
            except durableq.DurableQError as exc:
                seen[name] = exc
        finish.wait()  # the thread lives on until the batch is over (its end is another test's)

    with gate_held(db):
        line_up(
            db,
            calls,
            {"bad handle": bad_delete_then_read, "send": lambda: queue.send("kept"), "blocking": blocking},
        )
    until(lambda: "peek" in seen, "the failed member's reads are done")
    blocking.release()
    until(lambda: {"send", "blocking"} <= calls.outcomes.keys(), "the batch is over")
    finish.set()
    outcomes = calls.join()
    assert isinstance(outcomes["send"], durableq.SendResult), outcomes["send"]
    assert outcomes["blocking"] is None, outcomes["blocking"]
    assert seen == {"statement": 0, "peek": []}, "a read saw writes of a batch not yet committed"
    broker.close()
    assert _stored(db_path) == {outcomes["send"].message_id}
    with durableq.open(db_path) as reopened:
        assert reopened.get_queue("jobs").attributes()["delay_seconds"] == 3


class _ForkInThread:
    """``os.fork()`` from a thread of its own; the child runs ``child`` (its return value is the
    exit code) and the parent thread waits for it."""

    def __init__(self, child: Callable[[], int]) -> None:
        self.forked = threading.Event()
        self.status: int | None = None
        self._child = child
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = self._child()
            finally:
                os._exit(code)
        self.forked.set()
        self.status = wait_child(pid)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> int:
        self._thread.join(120)
        assert self.status is not None, "the forking thread never saw its child end"
        return os.waitstatus_to_exitcode(self.status)


def _fork_waits_for_writes(fork: _ForkInThread) -> None:
    """Start the fork and see it wait for the writes under way (rather than copy one half done)."""
    fork.start()
    waiting = forks._before_fork.__code__
    until(lambda: fork.forked.is_set() or threads_inside(waiting), "the fork waits for the writes")
    assert not fork.forked.is_set(), "the process forked in the middle of a write transaction"


def _child_sends(queue: durableq.Queue, expected: list[str]) -> Callable[[], int]:
    def child() -> int:
        gc.collect()  # whatever the child dropped of its parent's is gone now, closed or not
        sent = [queue.send(f"child {n}") for n in range(2)]
        bodies = sorted(m.body for m in queue.peek())
        if len(sent) == 2 and bodies == expected:
            return 0
        print(f"the child sees {bodies}", file=sys.stderr, flush=True)
        return 2

    return child


def test_a_fork_waits_for_an_open_batch_and_the_child_then_writes_on_its_own(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls, blocking = Calls(), Blocking(db, "jobs", 3)
    with gate_held(db):
        line_up(db, calls, {"send": lambda: queue.send("from the parent"), "blocking": blocking})
    blocking.inside.wait()
    fork = _ForkInThread(_child_sends(queue, ["child 0", "child 1", "from the parent"]))
    try:
        _fork_waits_for_writes(fork)
    finally:
        blocking.release()
    outcomes = calls.join()
    assert fork.join() == 0
    assert isinstance(outcomes["send"], durableq.SendResult) and outcomes["blocking"] is None, outcomes
    broker.close()
    with durableq.open(db_path) as reopened:
        again = reopened.get_queue("jobs")
        assert sorted(m.body for m in again.peek()) == ["child 0", "child 1", "from the parent"]
        assert again.attributes()["delay_seconds"] == 3


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_fork_waits_for_a_threads_own_write_and_the_child_then_writes(
    db_path: Path, durability: str
) -> None:
    # A write alone runs on its thread's own connection: copied in the middle of its transaction,
    # SQLite's lock table of the child would hold the write lock for good (the child's sends
    # then fail with DatabaseLocked), and closing the copy would rewrite the parent's WAL index.
    with durableq.open(db_path, durability=durability, busy_timeout=3) as broker:
        queue = broker.create_queue("jobs")
        holder = Blocking(db_of(broker), "jobs", 4)
        calls = Calls()
        calls.start("holder", holder)
        holder.inside.wait()
        fork = _ForkInThread(_child_sends(queue, ["child 0", "child 1"]))
        try:
            _fork_waits_for_writes(fork)
        finally:
            holder.release()
        assert calls.join()["holder"] is None
        assert fork.join() == 0
        assert queue.attributes()["delay_seconds"] == 4


def _run(scenario: str, path: Path, seconds: float) -> dict[str, Any]:
    """Run a scenario of tests/grouped_writers.py in a process of its own: a crash or a hang fails."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.grouped_writers", scenario, str(path), str(seconds)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=seconds + WATCHDOG + 30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the writers of {scenario!r} never finished (blocked?): {exc.stderr!r}")
    assert done.returncode == 0, f"{scenario!r} ended with exit code {done.returncode}: {done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize(
    ("scenario", "seconds"),
    [("member-thread-ends", 0), ("mix", 1.0), ("short-lived", 1.0), ("buffered", 1.0)],
)
def test_failing_writes_beside_sends_lose_no_acknowledged_send(
    scenario: str, seconds: float, db_path: Path
) -> None:
    report = _run(scenario, db_path, seconds)
    assert report["foreign"] == [], "a send raised, though its own write was good"
    assert report["odd"] == []
    assert report["acknowledged"], "nothing was sent"
    assert report["batches"] > 0, "no writes shared a transaction: the scenario tests nothing"
    missing = set(report["acknowledged"]) - _stored(db_path)
    assert not missing, (
        f"{len(missing)} of {len(report['acknowledged'])} acknowledged sends are not in the file"
    )


def test_when_sqlite_ends_the_shared_transaction_its_members_fail_and_the_next_begins_anew(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls = Calls()
    with db.write() as conn:
        conn.execute("CREATE TABLE filler (x BLOB)")

    def fills_the_file() -> None:
        with db.write() as conn:  # SQLITE_FULL of an INSERT rolls back the whole transaction
            limit = conn.execute("PRAGMA max_page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
            try:
                conn.execute("INSERT INTO filler VALUES (zeroblob(4000000))")
            finally:
                conn.execute(f"PRAGMA max_page_count = {limit}")

    with gate_held(db):
        line_up(
            db,
            calls,
            {"held": lambda: queue.send("a"), "full": fills_the_file, "after": lambda: queue.send("b")},
        )
    outcomes = calls.join()
    assert isinstance(outcomes["full"], durableq.DatabaseFull), outcomes["full"]
    # The send whose work the ended transaction held fails too (it was not committed) ...
    assert isinstance(outcomes["held"], durableq.DatabaseFull), outcomes["held"]
    # ... and the next member's work runs in a new transaction, and is committed.
    assert isinstance(outcomes["after"], durableq.SendResult), outcomes["after"]
    broker.close()
    assert _stored(db_path) == {outcomes["after"].message_id}


def test_a_members_interrupt_is_its_own(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls = Calls()

    def interrupted() -> str:
        try:
            with db.write() as conn:
                conn.execute("UPDATE durableq_queues SET delay_seconds = 9 WHERE name = 'jobs'")
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            return "interrupted"

    with gate_held(db):
        line_up(
            db,
            calls,
            {"a": lambda: queue.send("a"), "interrupted": interrupted, "b": lambda: queue.send("b")},
        )
    outcomes = calls.join()
    assert outcomes["interrupted"] == "interrupted"
    assert isinstance(outcomes["a"], durableq.SendResult) and isinstance(outcomes["b"], durableq.SendResult)
    assert sorted(m.body for m in queue.peek()) == ["a", "b"]
    assert queue.attributes()["delay_seconds"] == 0


def _interrupt_main_when(
    condition: Callable[[], bool], then: Callable[[], None] = lambda: None
) -> threading.Thread:
    """A thread that sends SIGINT (KeyboardInterrupt) to the main thread, the test's, once
    ``condition`` holds and the main thread waits at the gate, then does ``then``."""
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()

    def interrupt() -> None:
        until(lambda: condition() and main in threads_inside(group._Signal.wait.__code__), "the test waits")
        signal.pthread_kill(main, signal.SIGINT)
        then()

    thread = threading.Thread(target=interrupt)
    thread.start()
    return thread


def test_a_write_interrupted_while_it_waits_in_line_leaves_the_line(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls = Calls()
    with gate_held(db):
        line_up(db, calls, {"before": lambda: queue.send("before")})
        interrupter = _interrupt_main_when(lambda: db.waiting == 2)
        with pytest.raises(KeyboardInterrupt):
            queue.send("interrupted")
        interrupter.join()
        assert db.waiting == 1, "the interrupted write is still in line"
        calls.start("after", lambda: queue.send("after"))
        until(lambda: db.waiting == 2, "the next write waits in line")
    outcomes = calls.join()
    assert all(isinstance(o, durableq.SendResult) for o in outcomes.values()), outcomes
    assert sorted(m.body for m in queue.peek()) == ["after", "before"]


def test_a_write_interrupted_while_its_batch_runs_passes_its_turn_on(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls, holder, first = Calls(), Blocking(db, "jobs", 1), Blocking(db, "jobs", 3)
    calls.start("holder", holder)  # writes alone: the writes below wait in line behind it
    holder.inside.wait()
    line_up(db, calls, {"first": first})

    def let_the_batch_go() -> None:
        first.release()  # the interrupted write waits for its turn, to pass it on

    def batch_runs_and_main_waits_its_turn() -> bool:
        if db.waiting == 2 and "after" not in calls.threads:
            calls.start("after", lambda: queue.send("after"))
        if db.waiting == 3:
            holder.release()  # the three in line form one batch; "first" holds it open
        return first.inside.is_set()

    interrupter = _interrupt_main_when(batch_runs_and_main_waits_its_turn, let_the_batch_go)
    with pytest.raises(KeyboardInterrupt):
        queue.send("interrupted")
    interrupter.join()
    outcomes = calls.join()
    assert outcomes["holder"] is None and outcomes["first"] is None, outcomes
    assert isinstance(outcomes["after"], durableq.SendResult), outcomes["after"]
    assert [m.body for m in queue.peek()] == ["after"]
    assert queue.attributes()["delay_seconds"] == 3
    queue.send("the gate is free")


def test_closing_during_a_batch_closes_the_batch_connection_after_it(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls, blocking = Calls(), Blocking(db, "jobs", 3)
    with gate_held(db):
        line_up(db, calls, {"send": lambda: queue.send("kept"), "blocking": blocking})
    blocking.inside.wait()
    calls.start("close", broker.close)  # its last writes wait behind the batch; then it closes the file
    until(lambda: db.waiting >= 1 or db._closed, "the broker closes")
    assert db._shared is not None, "the batch's connection was closed under the batch"
    blocking.release()
    outcomes = calls.join()
    assert isinstance(outcomes["send"], durableq.SendResult), outcomes
    assert outcomes["blocking"] is None and outcomes["close"] is None, outcomes
    assert db._shared is None, "closing the broker left the batch's connection open"
    assert _stored(db_path) == {outcomes["send"].message_id}
