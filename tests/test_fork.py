"""A fork must not touch the parent's connections, whichever thread opened them.

In a forked child, CPython deletes the states of every thread but the forking one before any
``os.register_at_fork`` handler runs; their thread-local data dies with them, and with it the
object whose finalizer closes a thread's connection.  Closing a copy of a PostgreSQL connection
sends the server a Terminate message on the socket the parent still uses, which ends the
parent's session; closing a copy of a SQLite connection is what SQLite's documentation forbids
across a fork.  So the child must drop its copies unclosed, and the parent's threads go on.
"""

from __future__ import annotations

import os
import threading

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
