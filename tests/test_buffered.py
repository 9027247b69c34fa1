"""BufferedQueue: client-side batches and prefetch over a real queue file."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

import durableq
from durableq import BufferedQueue
from tests.conftest import FakeClock, sql_rows

#: A partial batch that must not leave on its own during a test.
NEVER = 60.0


def test_sends_leave_in_full_batches_and_each_future_holds_its_result(
    queue: durableq.Queue, target: str
) -> None:
    with BufferedQueue(queue, max_batch=10, max_wait=NEVER) as buffered:
        futures = [buffered.send(f"m{n}") for n in range(25)]
        assert all(f.done() for f in futures[:20]), "a full batch leaves at once"
        assert not any(f.done() for f in futures[20:]), "a partial batch waits for max_wait or flush"
        buffered.flush()
        assert all(f.done() for f in futures)
        # Committed: another connection sees them.
        stored = {row[0] for row in sql_rows(target, "SELECT message_id FROM durableq_messages")}
    assert {f.result().message_id for f in futures} == stored and len(stored) == 25
    assert [m.body for m in queue.peek(limit=30)] == [f"m{n}" for n in range(25)]


def test_a_partial_batch_leaves_after_max_wait(queue: durableq.Queue) -> None:
    with BufferedQueue(queue, max_wait=0.05) as buffered:
        sent = buffered.send("alone").result(timeout=30)  # no flush: the timer sends it
        assert [m.message_id for m in queue.peek()] == [sent.message_id]


def test_fifo_groups_keep_their_order_across_batches(fifo: durableq.Queue) -> None:
    with BufferedQueue(fifo, max_batch=4, max_wait=NEVER) as buffered:
        for n in range(30):
            buffered.send(f"{n % 3}:{n}", group_id=f"g{n % 3}", deduplication_id=str(n))
    by_group: dict[str, list[int]] = defaultdict(list)
    while messages := fifo.receive(10):
        for m in messages:
            by_group[m.group_id or ""].append(int(m.body.split(":")[1]))
            fifo.delete(m.receipt_handle)
    assert by_group == {f"g{g}": list(range(g, 30, 3)) for g in range(3)}


def test_an_entrys_error_is_on_its_future_alone_and_a_batchs_on_every_future(
    broker: durableq.Broker, queue: durableq.Queue
) -> None:
    with BufferedQueue(queue, max_wait=NEVER) as buffered:
        good, bad = buffered.send("fine"), buffered.send("bad \x00 character")
        buffered.flush()
        assert good.result().message_id
        with pytest.raises(durableq.InvalidMessageContents):
            bad.result()
        broker.delete_queue("jobs")
        lost = [buffered.send("to nowhere") for _ in range(3)]
        buffered.flush()
        for future in lost:
            with pytest.raises(durableq.QueueDoesNotExist):
                future.result()


def test_deletes_and_visibility_changes_are_batched(queue: durableq.Queue) -> None:
    for n in range(12):
        queue.send(f"m{n}")
    received = queue.receive(10) + queue.receive(2)
    with BufferedQueue(queue, max_wait=NEVER) as buffered:
        deletes = [buffered.delete(m.receipt_handle) for m in received[:10]]
        assert all(f.done() and f.result() is None for f in deletes)
        released = [buffered.change_visibility(m.receipt_handle, 0) for m in received[10:]]
        bogus = buffered.delete("not a receipt handle")
    assert all(f.result() is None for f in released)
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        bogus.result()
    assert sorted(m.body for m in queue.receive(10)) == ["m10", "m11"]


def test_receive_prefetches_and_close_releases_what_was_not_handed_out(queue: durableq.Queue) -> None:
    for n in range(15):
        queue.send(f"m{n}")
    with BufferedQueue(queue, prefetch=9) as buffered:
        (first,) = buffered.receive(1)
        assert queue.stats().approximate_number_of_messages_not_visible == 10  # 1 handed out, 9 ahead
        more = buffered.receive(3)
        assert len(more) == 3 and queue.stats().approximate_number_of_messages_not_visible == 10
    stats = queue.stats()
    assert stats.approximate_number_of_messages_not_visible == 4  # the 4 handed out
    assert stats.approximate_number_of_messages == 11
    handed = {first.message_id, *(m.message_id for m in more)}
    assert not handed & {m.message_id for m in queue.receive(10) + queue.receive(10)}


def test_a_prefetched_message_past_half_its_visibility_timeout_is_not_handed_out(
    queue: durableq.Queue, clock: FakeClock
) -> None:
    for n in range(15):
        queue.send(f"m{n}")
    with BufferedQueue(queue, visibility_timeout=30) as buffered:
        buffered.receive(1)  # m0, and m1-m9 fetched ahead
        clock.advance(16)
        (later,) = buffered.receive(1)
        assert later.body not in {f"m{n}" for n in range(10)}, "handed out with under half its time left"


def test_threads_share_a_buffer_and_nothing_is_lost_or_doubled(queue: durableq.Queue) -> None:
    results: list[str] = []
    lock = threading.Lock()
    with BufferedQueue(queue, max_wait=0.01) as buffered:

        def produce(index: int) -> None:
            futures = [buffered.send(f"{index}.{n}") for n in range(100)]
            ids = [f.result(timeout=60).message_id for f in futures]
            with lock:
                results.extend(ids)

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(results) == len(set(results)) == 400
    assert queue.stats().approximate_number_of_messages == 400


def test_a_closed_buffer_refuses_calls_and_closing_twice_is_fine(queue: durableq.Queue) -> None:
    buffered = BufferedQueue(queue)
    pending = buffered.send("sent by close")
    buffered.close()
    buffered.close()
    assert pending.result().message_id
    with pytest.raises(durableq.UnsupportedOperation, match="closed"):
        buffered.send("late")


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"max_batch": 0}, "max_batch must be"),
        ({"max_batch": 11}, "max_batch must be"),
        ({"max_wait": -1}, "max_wait must be"),
        ({"prefetch": 11}, "prefetch must be"),
        ({"visibility_timeout": 43_201}, "visibility_timeout must be"),
    ],
)
def test_bad_settings_are_refused(queue: durableq.Queue, arguments: dict[str, object], words: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match=words):
        BufferedQueue(queue, **arguments)  # type: ignore[arg-type]


def test_only_a_queue_can_be_buffered() -> None:
    with pytest.raises(durableq.InvalidParameterValue, match=r"wraps a durableq\.Queue"):
        BufferedQueue("jobs")  # type: ignore[arg-type]
