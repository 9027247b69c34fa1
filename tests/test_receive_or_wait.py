"""``Queue.receive_or_wait``: receive_async's first look made in the calling thread, the rest awaited.

The SQS endpoint makes a ReceiveMessage's first look in the pool thread that
already parsed the request; only a receive that found nothing and is to wait
goes back to the event loop.  These pin that it keeps every rule of
``receive_async`` (the same claims, the same count of empty receives, the
queue's own wait time) and that a receive left unawaited holds nothing.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

import durableq
from durableq.ops.waiting_receive import WaitingReceive
from tests.conftest import until_async
from tests.test_long_poll_watcher import waiting


def empty_receives(queue: durableq.Queue) -> int:
    return sum(m.empty_receives for m in queue.metrics())


def test_messages_come_from_the_first_look(queue: durableq.Queue) -> None:
    queue.send("a")
    queue.send("b")
    got = queue.receive_or_wait(max_messages=10, wait_time=20)
    assert isinstance(got, list) and sorted(m.body for m in got) == ["a", "b"]
    assert [m.receive_count for m in got] == [1, 1]
    assert queue.receive(wait_time=0) == []  # they were claimed, as by a receive


def test_nothing_and_no_wait_is_an_empty_receive_counted_once(queue: durableq.Queue) -> None:
    assert queue.receive_or_wait(wait_time=0) == []
    assert queue.receive_or_wait() == []  # the queue's ReceiveWaitTimeSeconds: 0
    assert empty_receives(queue) == 2


def test_the_queues_own_wait_time_makes_it_wait(broker: durableq.Broker, queue: durableq.Queue) -> None:
    queue.set_attributes(receive_wait_time=20)
    pending = queue.receive_or_wait()
    assert isinstance(pending, WaitingReceive)

    async def scenario() -> list[durableq.Message]:
        with ThreadPoolExecutor(1) as executor:
            poll = asyncio.ensure_future(pending.result(executor))
            await until_async(lambda: waiting(broker) == 1, "the receive waits")
            await asyncio.get_running_loop().run_in_executor(executor, queue.send, "came later")
            return await poll

    [message] = asyncio.run(scenario())
    assert message.body == "came later" and message.receive_count == 1
    assert empty_receives(queue) == 0  # the empty first look is not an empty receive of its own


def test_a_wait_that_ends_empty_is_counted_once(queue: durableq.Queue) -> None:
    pending = queue.receive_or_wait(wait_time=1)
    assert isinstance(pending, WaitingReceive)
    assert asyncio.run(pending.result(None)) == []
    assert empty_receives(queue) == 1


def test_a_waiting_receive_left_unawaited_holds_nothing(
    broker: durableq.Broker, queue: durableq.Queue
) -> None:
    pending = queue.receive_or_wait(wait_time=20)
    assert isinstance(pending, WaitingReceive)
    assert waiting(broker) == 0  # it joins a waiting room only once awaited
    del pending
    queue.send("for the next one")
    [message] = queue.receive()
    assert message.body == "for the next one" and message.receive_count == 1


def test_it_checks_its_arguments_as_receive_does(queue: durableq.Queue) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="wait_time must be"):
        queue.receive_or_wait(wait_time=21)
    with pytest.raises(durableq.InvalidParameterValue, match="max_messages"):
        queue.receive_or_wait(max_messages=11)


def test_put_back_undoes_a_receive_its_receiver_never_got(queue: durableq.Queue) -> None:
    """What a server does when its client hung up before the answer was written: the messages are
    visible again at once and their receive is not counted (change_visibility(0) would count it)."""
    queue.send("a")
    first = queue.receive_or_wait(visibility_timeout=600)
    assert isinstance(first, list) and [m.body for m in first] == ["a"]
    queue.put_back(first)
    [again] = queue.receive(visibility_timeout=600)
    assert (again.body, again.receive_count) == ("a", 1)
    queue.put_back([])  # nothing to undo: no write at all


def test_put_back_keeps_a_fifo_receive_with_an_attempt_id_for_its_retry(fifo: durableq.Queue) -> None:
    """The retry with the same attempt id is SQS's way to recover a lost answer: it is handed the same
    messages, so they are not made visible to anyone else in between."""
    fifo.send("a", group_id="g", deduplication_id="1")
    first = fifo.receive(attempt_id="try-1", visibility_timeout=600)
    fifo.put_back(first, attempt_id="try-1")
    assert fifo.receive(visibility_timeout=600) == []  # still held for the retry
    [retried] = fifo.receive(attempt_id="try-1", visibility_timeout=600)
    assert retried.receipt_handle == first[0].receipt_handle
