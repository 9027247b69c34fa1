"""Request-response: each requester's own reply queue, correlation ids, timeouts, dropped late
replies, and replies sent in the same transaction as the delete of their request, even when the
responder is killed at any moment."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

import durableq
from durableq.rpc import CORRELATION_ID, REPLY_TO, Requester, Responder
from tests.conftest import FakeClock, until

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def responding(queue: durableq.Queue, handler=lambda m: f"re: {m.body}") -> Iterator[Responder]:  # type: ignore[no-untyped-def]
    responder = Responder(queue, handler, wait_time=1, concurrency=2)
    thread = threading.Thread(target=responder.run)
    thread.start()
    try:
        yield responder
    finally:
        responder.stop()
        thread.join()


@pytest.fixture
def real(tmp_path: Path) -> Iterator[durableq.Broker]:
    with durableq.open(tmp_path / "rpc.db", durability="normal") as broker:
        yield broker


def test_a_call_gets_its_reply_on_a_reply_queue_of_its_own(real: durableq.Broker) -> None:
    requests = real.create_queue("resize")
    with responding(requests), Requester(real, "resize") as one, Requester(real, requests) as two:
        assert one.reply_queue != two.reply_queue
        assert sorted(real.list_queues("reply-")) == sorted([one.reply_queue, two.reply_queue])
        reply = one.call("photo 7", attributes={"size": 3}, timeout=30)
        assert reply.body == "re: photo 7"
        assert set(reply.attributes) == {CORRELATION_ID}
        assert two.call("photo 8").body == "re: photo 8"
    assert real.list_queues("reply-") == []  # each requester deleted its reply queue
    assert requests.stats().approximate_number_of_messages == 0


def test_concurrent_calls_each_get_their_own_reply(real: durableq.Broker) -> None:
    requests = real.create_queue("echo")
    with responding(requests), Requester(real, "echo") as requester:
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda i: requester.call(str(i), timeout=60).body, range(40)))
        futures = [requester.call_async(f"async {i}", timeout=60) for i in range(20)]
        assert [f.result().body for f in futures] == [f"re: async {i}" for i in range(20)]
    assert replies == [f"re: {i}" for i in range(40)]
    assert requester.dropped == 0


def test_no_reply_in_time_is_a_clear_error_and_a_late_reply_is_dropped(real: durableq.Broker) -> None:
    requests = real.create_queue("slow")
    with Requester(real, "slow") as requester:
        with pytest.raises(durableq.RequestTimeout, match="no reply within 1 s to a request on 'slow'"):
            requester.call("hello", timeout=1)
        (request,) = requests.receive()
        requests.respond(request, "too late")  # answered after the call gave up
        assert requester.call_async("x", timeout=1).exception(timeout=30) is not None  # also times out
        until(lambda: requester.dropped == 1, "the late reply is dropped")
        replies = real.get_queue(requester.reply_queue)
        until(lambda: replies.stats().approximate_number_of_messages == 0, "the late reply is deleted")


def test_a_reply_that_matches_no_call_is_dropped(real: durableq.Broker) -> None:
    requests = real.create_queue("echo")
    with responding(requests), Requester(real, "echo") as requester:
        stray = real.get_queue(requester.reply_queue)
        stray.send("nobody asked", attributes={CORRELATION_ID: "0" * 32})
        stray.send("no id at all")
        assert requester.call("real").body == "re: real"
        until(lambda: requester.dropped == 2, "both strays are dropped")


def test_responding_needs_a_request_and_survives_a_requester_that_left(real: durableq.Broker) -> None:
    requests = real.create_queue("jobs")
    requests.send("not a request")
    (plain,) = requests.receive()
    with pytest.raises(durableq.InvalidParameterValue, match="not a request"):
        requests.respond(plain, "?")
    requests.send("orphan", attributes={REPLY_TO: "reply-gone", CORRELATION_ID: "1"})
    (orphan,) = requests.receive()
    assert requests.respond(orphan, "nobody listens") is None  # the request goes anyway
    assert [m.body for m in requests.peek()] == ["not a request"]


def test_reserved_attributes_and_bad_timeouts_are_refused(real: durableq.Broker) -> None:
    real.create_queue("jobs")
    with Requester(real, "jobs") as requester:
        with pytest.raises(durableq.InvalidParameterValue, match="set by the requester"):
            requester.call("x", attributes={REPLY_TO: "elsewhere"})
        with pytest.raises(durableq.InvalidParameterValue, match="timeout"):
            requester.call("x", timeout=-1)
    with pytest.raises(durableq.BrokerClosed):
        requester.call("x")


def test_a_handler_that_returns_no_text_fails_its_request_like_any_job(real: durableq.Broker) -> None:
    requests = real.create_queue("jobs", visibility_timeout=30)
    with responding(requests, handler=lambda m: 42), Requester(real, "jobs") as requester:
        with pytest.raises(durableq.RequestTimeout):
            requester.call("x", timeout=2)
    (left,) = requests.peek()  # not deleted: left for a retry after the worker's back-off
    assert left.body == "x" and left.receive_count >= 1


def _responder(db: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [str(Path(sys.executable).parent / "durableq"), "--db", str(db), "worker", "requests"]
    command += ["tests.worker_handlers:reply_upper_slowly", "--respond", "--wait", "1", "--concurrency", "4"]
    return subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)


def test_every_call_gets_exactly_one_reply_while_responders_are_killed_at_random(tmp_path: Path) -> None:
    # The reply and the delete of its request commit together: a responder killed before the commit
    # leaves the request to be answered again; one killed after has sent its reply.  Either way,
    # each call gets one reply, and no reply is ever sent twice (a second one would be dropped).
    db = tmp_path / "rpc.db"
    rng = random.Random(7)
    with durableq.open(db) as broker:
        broker.create_queue("requests", visibility_timeout=1)
        with Requester(broker, "requests") as requester:
            futures = {requester.call_async(f"request {i}", timeout=300): f"REQUEST {i}" for i in range(300)}
            answered_by_killed = []

            def answered() -> int:
                return sum(f.done() for f in futures)

            for _ in range(6):
                if answered() == len(futures):
                    break
                before = answered()
                responder = _responder(db)
                # Killed once it is answering (whatever the machine's speed), at a random moment after.
                until(lambda: answered() > before, "the responder answers", timeout=120)  # noqa: B023
                time.sleep(rng.uniform(0.0, 0.3))
                responder.send_signal(signal.SIGKILL)
                responder.wait()
                answered_by_killed.append(answered())
            responder = _responder(db)  # one left running until every call has its reply
            try:
                for future, wanted in futures.items():
                    assert future.result(timeout=120).body == wanted
            finally:
                responder.terminate()
                responder.wait()
            assert requester.dropped == 0  # no request was answered twice
        assert broker.get_queue("requests").stats().approximate_number_of_messages == 0
    # Kills fell while there was work: responders were killed with some calls answered, not all.
    assert sum(0 < n < len(futures) for n in answered_by_killed) >= 2, answered_by_killed


def test_a_requester_whose_reply_queue_was_deleted_makes_a_new_one(target: str, clock: FakeClock) -> None:
    """A process paused past its reply queue's idle timeout finds the queue deleted by another
    broker's reaper: the calls that named it fail at once with a clear error (their replies are lost),
    and the requester goes on with a new reply queue; one deleted while no call waits is replaced
    before the next call names it (issue 27)."""
    with (
        durableq.open(target, clock=clock, durability="normal") as broker,
        durableq.open(target, clock=clock, durability="normal") as other,
    ):
        requests = broker.create_queue("resize")
        with Requester(broker, "resize", idle_timeout=60) as requester:
            first = requester.reply_queue
            waiting = requester.call_async("sent before the pause", timeout=60)
            clock.advance(60 + 120)  # paused past the idle timeout (and the minute of its last receive)
            assert other.reap_idle_queues() == [first]
            with pytest.raises(durableq.QueueDoesNotExist, match=f"reply queue '{first}' .* was deleted"):
                waiting.result(timeout=30)
            second = requester.reply_queue
            assert second != first and real_queues(broker) == {"resize", second}
            with responding(requests):
                assert requester.call("after the pause", timeout=30).body == "re: after the pause"
                other.delete_queue(second)  # while no call waits
                assert requester.call("after a delete", timeout=30).body == "re: after a delete"
            third = requester.reply_queue
            assert third not in (first, second) and real_queues(broker) == {"resize", third}
        assert real_queues(broker) == {"resize"}  # close deleted the last one
        assert broker._rt.temporary_queues.held() == []  # and the broker holds none of them any more


def real_queues(broker: durableq.Broker) -> set[str]:
    return set(broker.list_queues())
