"""A fork must not touch the parent's connections, whichever thread opened them.

In a forked child, CPython deletes the states of every thread but the forking one before any
``os.register_at_fork`` handler runs; their thread-local data dies with them, and with it the
object whose finalizer closes a thread's connection.  Closing a copy of a PostgreSQL connection
sends the server a Terminate message on the socket the parent still uses, which ends the
parent's session; closing a copy of a SQLite connection is what SQLite's documentation forbids
across a fork.  So the child must drop its copies unclosed, and the parent's threads go on.
"""

from __future__ import annotations

import faulthandler
import os
import threading
from pathlib import Path

import durableq


def _in_thread(call: object) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def test_a_child_that_exits_at_once_leaves_another_threads_connection_alone(
    broker: durableq.Broker,
) -> None:
    queue = broker.create_queue("jobs")
    go = threading.Event()
    forked = threading.Event()
    results: list[object] = []

    def other_thread() -> None:
        try:
            queue.send("before the fork")  # this thread's own connection
            go.set()
            forked.wait(60)
            results.append(queue.send("after the fork").message_id)  # the same connection again
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            results.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert go.wait(60)
    pid = os.fork()
    if pid == 0:
        os._exit(0)  # the child does nothing at all
    _, status = os.waitpid(pid, 0)
    forked.set()
    thread.join(60)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(results) == 1 and isinstance(results[0], str), results
    assert sorted(m.body for m in queue.peek(limit=10)) == ["after the fork", "before the fork"]


def test_a_child_can_use_the_broker_while_the_parents_threads_go_on(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    _in_thread(lambda: queue.send("from a thread that ended"))
    queue.send("from the main thread")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(reader)
            sent = queue.send("from the child")  # new connections of the child's own
            os.write(writer, sent.message_id.encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        child_sent = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    queue.send("from the parent, after")
    _in_thread(lambda: queue.send("from a new thread, after"))
    bodies = sorted(m.body for m in queue.peek(limit=10))
    assert child_sent and bodies == sorted(
        [
            "from a thread that ended",
            "from the main thread",
            "from the child",
            "from the parent, after",
            "from a new thread, after",
        ]
    )


def test_a_child_forked_while_a_thread_holds_the_brokers_locks_can_use_the_broker(
    target: str, tmp_path: Path
) -> None:
    """The locks of the payload store, the sealer and the keyring held by a thread at the fork (as a
    thread inside them would) are made anew in the child: it sends, receives and sweeps (issue 27:
    a child hung in the payload store's reclaim)."""
    keys = tmp_path / "keys.json"
    durableq.Keyring(keys).create("orders")
    with durableq.open(target, durability="normal", keyring=keys, payload_dir=tmp_path / "store") as broker:
        queue = broker.create_queue(
            "orders", kms_master_key_id="alias/orders", large_payloads=True, maximum_message_size=1024
        )
        queue.send("x" * 2_000)  # the sealer and the keyring have been used: their locks exist
        held = [broker._rt.payloads._lock, broker._rt.sealer._lock, broker.keyring._lock]
        holding, forked = threading.Event(), threading.Event()

        def hold() -> None:
            for lock in held:
                lock.acquire()
            holding.set()
            forked.wait(60)
            for lock in held:
                lock.release()

        holder = threading.Thread(target=hold)
        holder.start()
        assert holding.wait(60)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                faulthandler.dump_traceback_later(30, exit=True)  # a hang: its stacks, then exit 1
                queue.send("y" * 2_000)
                assert sorted(len(m.body) for m in queue.receive(10)) == [2_000, 2_000]
                broker.sweep_payloads()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        forked.set()
        holder.join(60)
    assert os.waitstatus_to_exitcode(status) == 0
