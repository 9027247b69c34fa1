"""A ``BufferedQueue`` inherited by a forked child: the child must not hand out the messages its parent
prefetched (they are the parent's, in flight), nor send the calls its parent buffered (the parent
sends them), and its own buffered calls must still leave within ``max_wait`` (the timer thread did
not come along)."""

from __future__ import annotations

import faulthandler
import json
import os

import durableq


def _in_child(work: object) -> object:
    """Run ``work()`` in a forked child; what it returned (JSON), or the child's error."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(reader)
            faulthandler.dump_traceback_later(60, exit=True)
            try:
                outcome = {"returned": work()}  # type: ignore[operator]
            except BaseException as exc:  # noqa: BLE001 - handed to the parent
                outcome = {"raised": repr(exc)}
            os.write(writer, json.dumps(outcome).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child hung or crashed"
    return json.loads(said)


def test_a_child_never_hands_out_the_messages_its_parent_prefetched(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    for n in range(3):
        queue.send(f"m{n}")
    buffered = durableq.BufferedQueue(queue, prefetch=10)
    first = buffered.receive(1)  # fetched all three: two wait in the parent's buffer
    assert len(first) == 1
    child = _in_child(lambda: [m.message_id for m in buffered.receive(10)])
    parents = [m.message_id for m in buffered.receive(10)]
    assert len(parents) == 2
    assert child == {"returned": []}, "the child was handed messages the parent holds"
    buffered.close()


def test_a_child_never_sends_the_calls_its_parent_buffered(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    buffered = durableq.BufferedQueue(queue, max_wait=60)
    future = buffered.send("once")  # waits for more, or for max_wait
    assert _in_child(lambda: buffered.close()) == {"returned": None}
    buffered.close()
    assert future.result(60).message_id
    assert [m.body for m in queue.peek(limit=10)] == ["once"]


def test_a_childs_buffered_send_leaves_within_max_wait(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    buffered = durableq.BufferedQueue(queue, max_wait=0.05)
    buffered.send("parent").result(60)

    def send_and_wait() -> str:
        future = buffered.send("child")
        try:
            return future.result(10).message_id  # max_wait is 0.05 s: 200 times that
        except TimeoutError:
            return "never resolved"

    outcome = _in_child(send_and_wait)
    buffered.close()
    assert outcome != {"returned": "never resolved"}, outcome
    assert sorted(m.body for m in queue.peek(limit=10)) == ["child", "parent"]
