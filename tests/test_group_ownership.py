"""A batch of group commit belongs to the gate, not to whichever thread started it: a member
that fails, a member's reads, a member's thread ending, a fork, touch no other member's work.

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
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq
from tests.conftest import FakeClock, until
from tests.grouped_writers import WATCHDOG
from tests.grouping import Blocking, Calls, db_of, gate_held, line_up, wait_child

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def broker(db_path: Path, clock: FakeClock) -> Iterator[durableq.Broker]:
    """Group commit is for durability "full", where every commit waits for an fsync."""
    with durableq.open(db_path, clock=clock, durability="full") as opened:
        yield opened


def _stored(path: Path) -> set[str]:
    with durableq.open(path) as broker:
        return {m.message_id for m in broker.get_queue("jobs").peek(limit=100_000)}


def test_a_member_that_failed_reads_what_is_committed_and_its_batch_loses_nothing(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls, blocking, finish = Calls(), Blocking(db, "jobs", 3), threading.Event()
    seen: dict[str, object] = {}

    def delay_now() -> int:
        with db.statement() as conn:
            delay: int = conn.execute("SELECT delay_seconds FROM queues WHERE name = 'jobs'").fetchone()[0]
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


def test_a_child_forked_while_a_batch_is_open_writes_on_its_own_and_the_batch_loses_nothing(
    broker: durableq.Broker, db_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    db = db_of(broker)
    calls, blocking = Calls(), Blocking(db, "jobs", 3)
    with gate_held(db):
        line_up(db, calls, {"send": lambda: queue.send("from the parent"), "blocking": blocking})
    blocking.inside.wait()
    pid = os.fork()
    if pid == 0:  # the child: none of its parent's writer threads came along, nor their batch
        code = 1
        try:
            gc.collect()  # whatever the child dropped of its parent's is gone now
            child_calls = Calls()
            with gate_held(db, transaction=False):  # a batch of the child's own (it waits for the
                # parent's commit: the parent holds the file's write lock until then)
                line_up(
                    db, child_calls, {f"child {n}": lambda n=n: queue.send(f"child {n}") for n in range(2)}
                )  # type: ignore[misc]
            outcomes = child_calls.join()
            sent = all(isinstance(o, durableq.SendResult) for o in outcomes.values())
            bodies = sorted(m.body for m in queue.peek())
            code = 0 if sent and bodies == ["child 0", "child 1", "from the parent"] else 2
        finally:
            os._exit(code)
    blocking.release()
    outcomes = calls.join()
    assert os.waitstatus_to_exitcode(wait_child(pid)) == 0
    assert isinstance(outcomes["send"], durableq.SendResult) and outcomes["blocking"] is None, outcomes
    broker.close()
    with durableq.open(db_path) as reopened:
        again = reopened.get_queue("jobs")
        assert sorted(m.body for m in again.peek()) == ["child 0", "child 1", "from the parent"]
        assert again.attributes()["delay_seconds"] == 3


def _run(scenario: str, path: Path, seconds: float) -> dict[str, list[str]]:
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
    report: dict[str, list[str]] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize(
    ("scenario", "seconds"),
    [("member-thread-ends", 0), ("mix", 2.0), ("short-lived", 2.0), ("buffered", 2.0)],
)
def test_failing_writes_beside_sends_lose_no_acknowledged_send(
    scenario: str, seconds: float, db_path: Path
) -> None:
    report = _run(scenario, db_path, seconds)
    assert report["foreign"] == [], "a send raised, though its own write was good"
    assert report["odd"] == []
    assert report["acknowledged"], "nothing was sent"
    missing = set(report["acknowledged"]) - _stored(db_path)
    assert not missing, (
        f"{len(missing)} of {len(report['acknowledged'])} acknowledged sends are not in the file"
    )
