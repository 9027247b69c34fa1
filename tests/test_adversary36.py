"""Adversary 36: a receive abandoned while its claim runs puts back what it took (``Receiver._settle``),
where that meets a full pool, a retry with the same attempt id, a second cancel and a closed broker."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import pytest

import durableq
from durableq.server.pool import BoundedPool
from tests.conftest import HeldLook, until, until_async


async def abandoned_claim(
    queue: durableq.Queue, held_look: HeldLook, executor: Executor, then: Callable[[], object], **receive: Any
) -> asyncio.Task[list[durableq.Message]]:
    """A receive whose first look is held; cancelled while held; its look then claims, and ``then``
    runs (on the loop, before the receive hears of the claim).  Returns the receive's task, ended."""
    held_look.arm()
    poll = asyncio.ensure_future(queue.receive_async(executor=executor, **receive))
    await until_async(held_look.holding, "the receive's look is held")
    poll.cancel()
    held_look.open()
    until(lambda: not held_look.holding(), "the abandoned look has claimed")  # the loop is held meanwhile
    then()
    await asyncio.wait((poll,))
    return poll


def test_put_back_when_the_pool_refuses_more_work(
    queue: durableq.Queue, held_look: HeldLook, broker: durableq.Broker
) -> None:
    """The endpoint's pool is full when the abandoned claim's put-back asks it for a thread (its slot
    was taken by other requests meanwhile): the message must still go back at once, and the receive
    ends cancelled, not with the pool's PoolBusy.  (Before: PoolBusy escaped ``receive_async`` and
    the message stayed hidden for its visibility timeout, its receive counted.)"""
    queue.send("taken by a receiver that left")
    pool = BoundedPool(threads=1, max_pending=0)
    release = threading.Event()

    def fill() -> None:
        until(lambda: pool.outstanding == 0, "the look's thread is free")
        pool.submit(release.wait, 30)  # another request takes the only slot

    try:
        poll = asyncio.run(abandoned_claim(queue, held_look, pool, fill, wait_time=0))
        assert poll.cancelled(), poll.exception()
    finally:
        release.set()
        pool.shutdown()
    [message] = queue.receive(visibility_timeout=0)
    assert message.body == "taken by a receiver that left"
    assert message.receive_count == 1


def test_a_retry_with_the_same_attempt_id_keeps_what_it_replayed(
    fifo: durableq.Queue, held_look: HeldLook
) -> None:
    """A FIFO receive with an attempt id is abandoned while its claim runs (the client's connection
    broke) and its retry, with the same attempt id, gets the claimed messages replayed before the
    put-back runs: the retry holds them now.  The put-back must not make them visible under the
    retry's hands (before: visible at once, so a third receive got the same message inside the
    retry's visibility timeout)."""
    fifo.send("first", group_id="g", deduplication_id="1")
    replayed: list[durableq.Message] = []

    def retry() -> None:
        replayed.extend(fifo.receive(attempt_id="retry-me", visibility_timeout=60))

    with ThreadPoolExecutor(1) as executor:
        poll = asyncio.run(
            abandoned_claim(fifo, held_look, executor, retry, attempt_id="retry-me", visibility_timeout=60)
        )
    assert poll.cancelled()
    assert [m.body for m in replayed] == ["first"]
    assert fifo.receive(visibility_timeout=60) == []  # the retry holds it
    fifo.delete(replayed[0].receipt_handle)  # and its handle still deletes it


def test_a_second_cancel_while_the_put_back_runs_waits_for_it(
    queue: durableq.Queue, held_look: HeldLook
) -> None:
    """The receive is cancelled again while its put-back waits for a thread (the server stops while
    polls settle): it still ends only once the message is back, and ends cancelled."""
    queue.send("put back despite two cancels")
    release = threading.Event()

    async def scenario(executor: ThreadPoolExecutor) -> asyncio.Task[list[durableq.Message]]:
        held_look.arm()
        poll = asyncio.ensure_future(queue.receive_async(executor=executor, wait_time=0))
        await until_async(held_look.holding, "the receive's look is held")
        poll.cancel()
        executor.submit(release.wait, 30)  # the put-back queues behind this
        held_look.open()
        await until_async(lambda: executor._work_queue.qsize() == 1, "the put-back is queued")
        poll.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not poll.done()  # not before the put-back has run
        release.set()
        await asyncio.wait((poll,))
        return poll

    with ThreadPoolExecutor(1) as executor:
        poll = asyncio.run(scenario(executor))
    assert poll.cancelled()
    [message] = queue.receive(visibility_timeout=0)
    assert message.receive_count == 1


@pytest.mark.parametrize("what", ["purge", "delete_queue"])
def test_a_put_back_after_the_messages_went_does_nothing(
    broker: durableq.Broker,
    queue: durableq.Queue,
    held_look: HeldLook,
    what: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Between the abandoned claim and its put-back the queue is purged, or deleted: the put-back
    changes nothing, brings nothing back, and the receive still ends cancelled."""
    queue.send("gone before the put-back")
    then = queue.purge if what == "purge" else lambda: broker.delete_queue("jobs")
    with ThreadPoolExecutor(1) as executor:
        poll = asyncio.run(abandoned_claim(queue, held_look, executor, then, wait_time=0))
    assert poll.cancelled()
    if what == "purge":
        assert queue.receive(visibility_timeout=0) == []
    else:
        assert "could not put back 1 messages of 'jobs'" in caplog.text
        assert broker.list_queues() == []


def test_a_put_back_fifo_message_comes_before_its_groups_later_ones(
    fifo: durableq.Queue, held_look: HeldLook
) -> None:
    """An abandoned receive claimed the first two messages of a group: put back, the group is free
    again and delivers in order, the two first; their receive uncounted."""
    for i in range(4):
        fifo.send(f"m{i}", group_id="g", deduplication_id=str(i))
    fifo.send("other", group_id="h", deduplication_id="o")
    with ThreadPoolExecutor(1) as executor:
        poll = asyncio.run(
            abandoned_claim(fifo, held_look, executor, lambda: None, max_messages=2, wait_time=0)
        )
    assert poll.cancelled()
    got = fifo.receive(max_messages=10, visibility_timeout=60)
    assert [m.body for m in got if m.group_id == "g"] == ["m0", "m1", "m2", "m3"]
    assert {m.body: m.receive_count for m in got}["m0"] == 1


def test_a_move_task_finishes_when_its_queue_stops_being_a_dead_letter_queue(
    broker: durableq.Broker, clock: Any
) -> None:
    """The move rule is checked when a task starts: a source whose redrive policy goes while the task
    runs still gets its dead letters back (they name it), nothing lost or doubled."""
    from durableq import RedrivePolicy

    dead = broker.create_queue("jobs-dlq")
    jobs = broker.create_queue("jobs", visibility_timeout=10, redrive_policy=RedrivePolicy("jobs-dlq", 1))
    for i in range(12):
        jobs.send(f"m{i}")
    for _ in range(2):
        jobs.receive(10)
    clock.advance(10)
    while jobs.receive(10):  # each receive moves what it would have returned
        clock.advance(10)
    assert dead.stats().approximate_number_of_messages == 12
    task = broker.start_message_move("jobs-dlq", max_per_second=6)
    jobs.set_attributes(redrive_policy=None)
    with pytest.raises(durableq.InvalidParameterValue, match="no queue's dead-letter queue"):
        broker.start_message_move("jobs-dlq")  # (refused now, before "already running")
    broker.wait_for_message_move(task.task_handle, 30)
    [done] = broker.list_message_moves("jobs-dlq")
    assert (done.status, done.moved) == ("COMPLETED", 12)
    bodies = sorted(m.body for _ in range(3) for m in jobs.receive(10, visibility_timeout=60))
    assert bodies == sorted(f"m{i}" for i in range(12))


@pytest.mark.parametrize("kind", ["virtual", "sealed large payload"])
def test_a_put_back_of_a_virtual_or_sealed_large_message_comes_back_whole(
    broker: durableq.Broker, held_look: HeldLook, kind: str, tmp_path: Any
) -> None:
    """A virtual queue's message goes back to that virtual queue only; an encrypted message stored
    outside its row (a large payload) goes back whole, readable by the next receive."""
    body = "x" * 300_000 if kind != "virtual" else "mine"
    if kind == "virtual":
        host = broker.create_queue("replies")
        queue = host.virtual_queue("alpha")
        opened = broker
    else:
        ring = durableq.Keyring(tmp_path / "keys.json")
        ring.create("orders")
        opened = durableq.open(
            broker.location, durability="normal", keyring=ring, payload_dir=broker.payload_dir
        )
        queue = opened.create_queue("orders", kms_master_key_id="alias/orders", large_payloads=True)
    try:
        queue.send(body)
        with ThreadPoolExecutor(1) as executor:
            poll = asyncio.run(abandoned_claim(queue, held_look, executor, lambda: None, wait_time=0))
        assert poll.cancelled()
        if kind == "virtual":
            assert host.receive(visibility_timeout=0) == []  # not the host's own
        [message] = queue.receive(visibility_timeout=60)
        assert (message.body, message.receive_count) == (body, 1)
    finally:
        if opened is not broker:
            opened.close()


def test_an_abandoned_fifo_receive_with_an_attempt_id_is_recovered_by_its_retry(
    fifo: durableq.Queue, held_look: HeldLook
) -> None:
    """What it claimed is kept for the retry SQS prescribes after a lost answer: the group stays held
    (no other receive gets its messages out of order) and the same attempt id gets the same message
    and handle, its receive counted once."""
    fifo.send("first", group_id="g", deduplication_id="1")
    fifo.send("second", group_id="g", deduplication_id="2")
    with ThreadPoolExecutor(1) as executor:
        poll = asyncio.run(
            abandoned_claim(fifo, held_look, executor, lambda: None, attempt_id="a-1", wait_time=0)
        )
    assert poll.cancelled()
    assert fifo.receive(10, visibility_timeout=60) == []  # the group is held for the retry
    [again] = fifo.receive(attempt_id="a-1")
    assert (again.body, again.receive_count) == ("first", 1)
    fifo.delete(again.receipt_handle)
    assert [m.body for m in fifo.receive(10)] == ["second"]
