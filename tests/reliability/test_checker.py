"""The checker catches what it claims to: each invariant broken on purpose, by editing the file behind
the library's back, must be reported (a checker that never fails would prove nothing)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq

from .checker import check_file
from .journal import Journal, read_journal
from .journaled import JournaledQueue


class Run:
    """A broker on a fresh file, processes simulated by journaled queues, and raw access to the file."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "run.db"
        self.journals = folder / "journals"
        self.journals.mkdir()
        self.broker = durableq.open(self.db)
        self.broker.create_queue("std", history=True)
        self.broker.create_queue("q.fifo", fifo=True, content_based_deduplication=True, history=True)
        self._journals: list[Journal] = []

    def process(self, queue: str, visibility_timeout: int = 30) -> JournaledQueue:
        """A journaled queue with its own journal, as if in another process (started and stopped cleanly)."""
        journal = Journal(self.journals / f"p{len(self._journals)}.jsonl")
        journal.write("start", role="test", receives_from=[queue])
        self._journals.append(journal)
        return JournaledQueue(self.broker.get_queue(queue), journal, visibility_timeout)

    def sql(self, statement: str, *params: object) -> None:
        with contextlib.closing(sqlite3.connect(self.db)) as conn:
            conn.execute(statement, params)
            conn.commit()

    def check(self, **options: object) -> None:
        self.broker.close()  # writes its counters
        for journal in self._journals:
            journal.write("stop")
        check_file(self.db, self.journals, queues=["std", "q.fifo"], **options)  # type: ignore[arg-type]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    run = Run(tmp_path)
    yield run
    run.broker.close()


def _breaks(run: Run, pattern: str, **options: object) -> None:
    with pytest.raises(AssertionError, match=pattern):
        run.check(**options)


def test_a_clean_run_passes(run: Run) -> None:
    queue = run.process("std")
    queue.send("a")
    for message in queue.receive(10):
        queue.delete(message.receipt_handle)
    run.check(drained=True)


def test_a_lost_message_is_reported(run: Run) -> None:
    run.process("std").send("a")
    run.sql("DELETE FROM durableq_messages")
    _breaks(run, "LOST")


def test_two_holders_inside_the_visibility_window_are_reported(run: Run) -> None:
    run.process("std").send("a")
    run.process("std").receive()
    run.sql("UPDATE durableq_messages SET visible_at = 0")  # as if a receive forgot to hide it
    run.process("std").receive()
    _breaks(run, "TWO HOLDERS")


def test_a_deleted_message_that_comes_back_is_reported(run: Run) -> None:
    queue = run.process("std")
    queue.send("a")
    (message,) = queue.receive()
    run.sql("CREATE TABLE saved AS SELECT * FROM durableq_messages")
    queue.delete(message.receipt_handle)
    run.sql("INSERT INTO durableq_messages SELECT * FROM saved")
    _breaks(run, "BACK")


def test_duplicates_and_phantoms_are_reported(run: Run) -> None:
    run.process("std").send("a")
    run.sql(
        "INSERT INTO durableq_messages (queue_id, message_id, body, enqueued_at, visible_at) "
        "SELECT queue_id, message_id, body, enqueued_at, visible_at FROM durableq_messages"
    )
    run.sql(
        "INSERT INTO durableq_messages (queue_id, message_id, body, enqueued_at, visible_at) "
        "VALUES (1, 'x', 'nobody', 0, 0)"
    )
    _breaks(run, "(?s)DUPLICATE ROWS.*PHANTOM")


def test_a_torn_batch_is_reported(run: Run) -> None:
    queue = run.process("std")
    queue._journal.write("batch-intent", q="std", bodies=["b0", "b1", "b2"], g=[None, None, None])
    run.broker.get_queue("std").send("b0")  # as if only one entry of the batch had been committed
    _breaks(run, "TORN BATCH")


def _two_in_one_group(run: Run) -> JournaledQueue:
    """Send "first" and "second" to group g; returns a consumer (another process)."""
    producer = run.process("q.fifo")
    producer.send("first", group_id="g")
    producer.send("second", group_id="g")
    return run.process("q.fifo")


def test_a_fifo_group_handed_out_while_one_of_its_messages_is_held_is_reported(run: Run) -> None:
    consumer = _two_in_one_group(run)
    (first,) = consumer.receive()
    # Swap the sequence numbers: the group's head is now "second", while "first" is held.
    run.sql("UPDATE durableq_messages SET sequence = 3 - sequence")
    run.sql("UPDATE durableq_fifo_groups SET available_at = 0")
    (second,) = consumer.receive()
    consumer.delete(first.receipt_handle)
    consumer.delete(second.receipt_handle)
    _breaks(run, "GROUP HELD", drained=True)


def test_a_fifo_group_received_out_of_order_is_reported(run: Run) -> None:
    consumer = _two_in_one_group(run)
    run.sql("UPDATE durableq_messages SET sequence = 3 - sequence")
    for _ in range(2):
        (message,) = consumer.receive()
        consumer.delete(message.receipt_handle)
    _breaks(run, "ORDER", drained=True)


def test_counters_above_the_truth_are_reported(run: Run) -> None:
    run.process("std").send("a")
    run.broker.close()
    run.sql("UPDATE durableq_queue_metrics SET sent = sent + 5")
    _breaks(run, "COUNTER: 'std' counted 6 sent")


def test_an_error_a_process_met_is_reported(run: Run) -> None:
    queue = run.process("std")
    run.broker.delete_queue("std")
    with pytest.raises(durableq.QueueDoesNotExist):
        queue.receive()
    with pytest.raises(AssertionError, match=r"ERROR .* receive on 'std' raised QueueDoesNotExist"):
        check_file(run.db, run.journals, queues=[])


def test_a_failure_after_the_message_was_being_deleted_is_legitimate(run: Run) -> None:
    # A worker's heartbeat may extend a message its own handler thread is deleting.
    queue = run.process("std")
    queue.send("a")
    (message,) = queue.receive()
    queue.delete(message.receipt_handle)
    with pytest.raises(durableq.InvalidParameterValue):
        queue.change_visibility(message.receipt_handle, 5)
    run.check()


def test_an_undelivered_message_is_reported_after_a_drain(run: Run) -> None:
    run.process("std").send("a")
    _breaks(run, "(?s)NEVER DELIVERED.*LEFT", drained=True)


@pytest.mark.parametrize(
    ("statement", "pattern"),
    [
        ("DELETE FROM durableq_message_events WHERE event = 'deleted'", "is gone but its events"),
        (
            "DELETE FROM durableq_message_events WHERE event = 'received'",
            "receives \\[1\\] of .* have no events",
        ),
        (
            "UPDATE durableq_message_events SET receive_count = 2 WHERE event = 'received'",
            "received events count",
        ),
        ("UPDATE durableq_message_events SET event = 'received' WHERE event = 'sent'", "one sent event"),
        ("DELETE FROM durableq_message_events", "has no events"),
    ],
)
def test_message_history_that_does_not_match_what_committed_is_reported(
    run: Run, statement: str, pattern: str
) -> None:
    queue = run.process("std")
    queue.send("a")
    queue.send("b")
    (message, _) = queue.receive(10)
    queue.delete(message.receipt_handle)
    run.sql(statement)
    _breaks(run, pattern)


def test_a_torn_journal_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    path.write_bytes(b'{"k":"start"}\n{"k":"se')
    with pytest.raises(AssertionError, match="torn"):
        read_journal(path)


def test_a_receive_put_back_for_a_client_that_left_is_accepted(run: Run) -> None:
    """The endpoint puts back what a long poll claimed for a client that left meanwhile (here killed
    mid-receive): the history shows that receive and its undoing, a visibility change at the count
    before it.  That is no broken promise (adversary 36: the hostile mix through the endpoint failed
    with "received events count [1, 1]" and "is gone but its events are [sent, received,
    visibility_changed, received, deleted]")."""
    Journal(run.journals / "killed.jsonl").write("start", role="test", receives_from=["std"])  # no stop
    queue = run.process("std")
    queue.send("a")
    [claimed] = run.broker.get_queue("std").receive()  # for the client that left: never journaled
    run.broker.get_queue("std").put_back([claimed])
    (message,) = queue.receive()
    assert message.receive_count == 1
    queue.delete(message.receipt_handle)
    run.check(drained=True)
