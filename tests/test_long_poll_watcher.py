"""Long polls woken by one watcher per process and file: no waiter polls, an async waiter holds no thread."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq.engines import change_sources, forks, watch
from durableq.engines.per_thread import PerThread
from tests.conftest import HeldLook, threads_inside, until, until_async, until_long_polls_wait


def waiting(broker: durableq.Broker) -> int:
    return broker._rt.receiver.waiting()


def watcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("durableq-watch")]


def _send(path: str, queue: str, bodies: list[str]) -> None:
    with durableq.open(path, durability="normal") as broker:
        target = broker.get_queue(queue)
        for body in bodies:
            target.send(body)


def send_from_another_process(path: str | Path, queue: str, bodies: list[str]) -> None:
    sender = multiprocessing.get_context("spawn").Process(target=_send, args=(str(path), queue, bodies))
    sender.start()
    sender.join(60)
    assert sender.exitcode == 0


def test_one_watcher_serves_every_waiter_of_the_process(target: str) -> None:
    before = len(watcher_threads())
    with (
        durableq.open(target, durability="normal") as first,
        durableq.open(target, durability="normal") as second,
    ):
        queues = [first.create_queue("jobs"), second.get_queue("jobs")]
        got: list[list[durableq.Message]] = []
        threads = [
            threading.Thread(target=lambda q=queues[i % 2]: got.append(q.receive(wait_time=20)))
            for i in range(20)
        ]
        for thread in threads:
            thread.start()
        until(lambda: waiting(first) + waiting(second) == 20, "all 20 polls wait")
        assert len(watcher_threads()) == before + 1  # one for the database, however many brokers and waiters
        send_from_another_process(target, "jobs", [f"m{i}" for i in range(20)])
        for thread in threads:
            thread.join(30)
        assert sorted(m.body for batch in got for m in batch) == sorted(f"m{i}" for i in range(20))
    until(
        lambda: len(watcher_threads()) == before, "the watcher has stopped"
    )  # the last broker to close stops it


def test_async_long_polls_hold_no_thread(target: str) -> None:
    """50 receives wait at once on one executor thread: only possible if waiting holds none."""

    async def scenario() -> list[list[durableq.Message]]:
        with durableq.open(target, durability="normal") as broker, ThreadPoolExecutor(1) as executor:
            queue = broker.create_queue("jobs")
            polls = [
                asyncio.ensure_future(queue.receive_async(wait_time=20, executor=executor)) for _ in range(50)
            ]
            await until_async(lambda: waiting(broker) == 50, "50 polls wait")
            await asyncio.get_running_loop().run_in_executor(
                None, send_from_another_process, target, "jobs", [f"m{i}" for i in range(50)]
            )
            return await asyncio.gather(*polls)

    results = asyncio.run(scenario())
    assert all(len(r) == 1 for r in results)
    assert sorted(r[0].body for r in results) == sorted(f"m{i}" for i in range(50))


def test_a_message_wakes_one_waiter_not_all(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from durableq.ops.receive import Receiver

    attempts = []
    claim = Receiver._attempt

    def counted(self: Receiver, *args: Any) -> Any:
        attempts.append(args)
        return claim(self, *args)

    monkeypatch.setattr(Receiver, "_attempt", counted)

    async def scenario() -> int:
        with durableq.open(target, durability="normal") as broker, ThreadPoolExecutor(2) as executor:
            queue = broker.create_queue("jobs")
            polls = [
                asyncio.ensure_future(queue.receive_async(wait_time=20, executor=executor)) for _ in range(10)
            ]
            await until_async(lambda: waiting(broker) == 10, "10 polls wait")
            await asyncio.get_running_loop().run_in_executor(executor, queue.send, "only one")
            done, pending = await asyncio.wait(polls, return_when=asyncio.FIRST_COMPLETED)
            for poll in pending:
                poll.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return len(done)

    assert asyncio.run(scenario()) == 1
    assert len(attempts) == 10 + 1  # each looked once on arrival; the message let exactly one look again


def test_cancelling_a_waiting_async_receive_takes_nothing(
    queue: durableq.Queue, broker: durableq.Broker
) -> None:
    async def scenario() -> None:
        poll = asyncio.ensure_future(queue.receive_async(wait_time=20))
        await until_async(lambda: waiting(broker) == 1, "the poll waits")
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll
        assert waiting(broker) == 0

    asyncio.run(scenario())
    queue.send("still here")
    [message] = queue.receive()
    assert message.body == "still here" and message.receive_count == 1


@pytest.mark.parametrize("kind", ["standard", "fifo"])
def test_a_receive_cancelled_while_its_claim_runs_takes_nothing(
    broker: durableq.Broker, kind: str, held_look: HeldLook
) -> None:
    """A look already running in a pool thread when its receive is cancelled (the endpoint's client
    hung up) cannot be stopped: the receive waits for it, and what it claimed goes back at once,
    its receive uncounted (before: hidden for the visibility timeout, receive count spent)."""
    queue = broker.create_queue("jobs.fifo", fifo=True) if kind == "fifo" else broker.create_queue("jobs")

    async def scenario() -> None:
        with ThreadPoolExecutor(1) as executor:
            poll = asyncio.ensure_future(queue.receive_async(wait_time=20, executor=executor))
            await until_async(lambda: waiting(broker) == 1, "the poll waits")
            held_look.arm()  # the look the send wakes: held until the receive is cancelled
            fifo = {"group_id": "g", "deduplication_id": "d"} if kind == "fifo" else {}
            queue.send("sent while it waited", **fifo)
            await until_async(held_look.holding, "the woken look is held")
            poll.cancel()
            held_look.open()  # the running look claims the message now, for a receive that has gone
            with pytest.raises(asyncio.CancelledError):
                await poll
        # (the executor has shut down: no look of that receive runs any more)

    asyncio.run(scenario())
    [message] = queue.receive(visibility_timeout=0)
    assert message.body == "sent while it waited"
    assert message.receive_count == 1  # the abandoned claim is not counted


def test_async_receive_follows_the_same_rules(queue: durableq.Queue) -> None:
    queue.send("a")
    with pytest.raises(durableq.InvalidParameterValue, match="wait_time must be"):
        asyncio.run(queue.receive_async(wait_time=21))
    [message] = asyncio.run(queue.receive_async(max_messages=10))
    assert message.body == "a"
    assert asyncio.run(queue.receive_async(wait_time=1)) == []
    assert sum(m.empty_receives for m in queue.metrics()) == 1


def test_closing_the_broker_wakes_waiting_receives(target: str) -> None:
    broker = durableq.open(target, durability="normal")
    queue = broker.create_queue("jobs")
    outcome: list[BaseException | list[durableq.Message]] = []

    def wait() -> None:
        try:
            outcome.append(queue.receive(wait_time=20))
        except durableq.DurableQError as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    until(lambda: waiting(broker) == 1, "the poll waits")
    started = time.monotonic()
    broker.close()
    waiter.join(20)
    assert isinstance(outcome[0], durableq.DatabaseError) and "closed" in str(outcome[0])
    assert time.monotonic() - started < 15  # woken, not left to its 20 s deadline


def test_the_stat_poll_fallback_wakes_a_long_poll(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where inotify is missing, one thread per file polls the WAL's stamp for every waiter."""
    monkeypatch.setattr(change_sources, "os_source", change_sources.StatSource)
    with durableq.open(db_path, durability="normal") as broker:
        queue = broker.create_queue("jobs")
        got: list[list[durableq.Message]] = []
        waiter = threading.Thread(target=lambda: got.append(queue.receive(wait_time=20)))
        waiter.start()
        until(lambda: waiting(broker) == 1, "the poll waits")
        assert isinstance(broker._rt.db.watcher()._source, change_sources.StatSource)
        send_from_another_process(db_path, "jobs", ["polled"])
        waiter.join(30)
    assert [m.body for m in got[0]] == ["polled"]


def _fork(child: Callable[[], None]) -> int:
    """Run ``child()`` in a forked child, which exits 0 if it returned, 1 if it raised; its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child()
            code = 0
        except BaseException:  # noqa: BLE001 - whatever it was, the child says so and exits 1
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def _exit_code(pid: int, deadline: float) -> int | None:
    """The forked child's exit code, or None if it still ran at ``deadline`` (it hung: killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def _forked(child: Callable[[], None], timeout: float = 30) -> int | None:
    """Run ``child()`` in a forked child and wait: its exit code (None: it hung, see :func:`_exit_code`)."""
    return _exit_code(_fork(child), time.monotonic() + timeout)


def test_a_child_forked_while_the_first_long_poll_starts_the_watcher_can_long_poll(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first long poll on a file starts its watcher under the process's watcher registry lock: a
    child forked at that moment inherits the lock held, and must still long-poll, on the broker it
    inherited and on one of its own (issue 27).  The watcher's start is held here until the fork."""
    inside, go_on = threading.Event(), threading.Event()
    start = watch.Watcher

    def held_open(*args: Any) -> watch.Watcher:
        inside.set()
        go_on.wait(30)
        return start(*args)

    with durableq.open(target, durability="normal") as broker:
        queue = broker.create_queue("jobs")
        monkeypatch.setattr(watch, "Watcher", held_open)
        poll = threading.Thread(target=queue.receive, kwargs={"wait_time": 1})
        poll.start()
        assert inside.wait(30)  # the poll thread holds the registry lock now, starting the watcher
        monkeypatch.undo()  # the child starts a real one
        try:
            code = _forked(lambda: _long_polls(target, queue))
        finally:
            go_on.set()
            poll.join()
    assert code == 0, "the forked child hung (None) or failed"


def test_a_forked_child_long_polls_on_the_broker_it_inherited(target: str) -> None:
    """The parent's watcher thread (and its waiting rooms) did not come along: a long poll of the
    child is still woken by a commit, not left to its deadline."""

    def child(queue: durableq.Queue) -> None:
        def send_once_waiting() -> None:
            until_long_polls_wait()
            queue.send("while the child waits")

        sender = threading.Thread(target=send_once_waiting)
        sender.start()
        got = queue.receive(wait_time=10)
        sender.join()
        assert [m.body for m in got] == ["while the child waits"]

    with durableq.open(target, durability="normal") as broker:
        queue = broker.create_queue("jobs")
        assert queue.receive(wait_time=1) == []  # the parent's watcher and rooms are in use now
        assert _forked(lambda: child(queue)) == 0


def test_a_forked_childs_connections_are_dropped_unclosed() -> None:
    """In a forked child the connections are its parent's: closing one could hang (a thread of the
    parent held its lock at the fork) or end the parent's session, so ``forget`` closes none, not even
    through the finalizers of the thread-local values it drops."""
    closed: list[str] = []
    connections: PerThread[str] = PerThread(closed.append)
    adopted, done = threading.Event(), threading.Event()

    def hold() -> None:
        connections.adopt("another thread's")
        adopted.set()
        done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert adopted.wait(30)
    connections.adopt("this thread's")
    connections.forget()
    done.set()
    holder.join()
    gc.collect()
    assert closed == [] and len(connections) == 0


def test_children_forked_while_first_long_polls_start_can_long_poll(target: str) -> None:
    """Forks at whatever moment they fall while three threads start their first long polls (the
    watcher, connections, SQLite calls): every child long-polls, on the inherited broker and on its
    own, and ends (issue 27: 3 of 12 runs hung)."""
    for _ in range(6):
        with durableq.open(target, durability="normal") as broker:
            queue = broker.create_queue("jobs")
            polls = [threading.Thread(target=queue.receive, kwargs={"wait_time": 1}) for _ in range(3)]
            for poll in polls:
                poll.start()

            children = [_fork(lambda queue=queue: _long_polls(target, queue)) for _ in range(4)]
            deadline = time.monotonic() + 30
            codes = [_exit_code(pid, deadline) for pid in children]
            for poll in polls:
                poll.join()
        assert codes == [0, 0, 0, 0], "a forked child hung (None) or failed"


def _long_polls(target: str, queue: durableq.Queue) -> None:
    """A forked child's long polls: on the broker it inherited, then on one of its own."""
    assert queue.receive(wait_time=1) == []
    with durableq.open(target, durability="normal") as own:
        assert own.get_queue("jobs").receive(wait_time=1) == []


def test_a_fork_waits_for_the_other_threads_to_leave_their_sqlite_calls() -> None:
    """SQLite's mutexes held by a thread at a fork stay held in the child for ever: a fork waits
    until no other thread is inside SQLite."""
    left: list[bool] = []

    def inside_sqlite() -> None:
        with forks.INSIDE:
            until(
                lambda: threads_inside(forks._before_fork.__code__), "the fork waits"
            )  # the fork waits for it
            left.append(True)

    thread = threading.Thread(target=inside_sqlite)
    thread.start()
    until(forks.others_inside, "another thread is inside")

    def child() -> None:
        assert left == [True]  # the fork came after the thread left
        assert not forks.others_inside()

    code = _forked(child)
    thread.join()
    assert code == 0


def test_a_timer_far_in_the_future_does_not_stop_the_watcher(tmp_path: Path) -> None:
    # A message due centuries from now on this process's clock (a broker clock far behind the real
    # one, a delay of a skewed host) asked the selector to wait longer than it can: the watcher
    # thread died of OverflowError and long polls fell back on their deadlines.
    with durableq.open(tmp_path / "q.db", durability="normal") as broker:
        queue = broker.create_queue("jobs")
        watcher = broker._rt.db.watcher()
        watcher.call_later(1e15, lambda: None)
        until(
            lambda: watcher._timeout(time.monotonic()) is not None, "the thread took it"
        )  # the thread has taken it
        ran = threading.Event()
        watcher.call_later(0.01, ran.set)  # a timer after the huge one: the thread still turns
        assert ran.wait(20), "the watcher thread stopped"
        got: list[durableq.Message] = []
        poll = threading.Thread(target=lambda: got.extend(queue.receive(wait_time=20)))
        poll.start()
        until_long_polls_wait(1)
        queue.send("woken")
        poll.join()
        assert [m.body for m in got] == ["woken"]
