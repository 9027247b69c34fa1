"""The worker, with real threads, processes and signals (real time: these are about processes)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

import durableq
from durableq import RedrivePolicy, SendEntry
from tests import worker_handlers
from tests.conftest import FakeClock
from tests.worker_handlers import events


def _jobs(log: Path, count: int, **extra: object) -> list[SendEntry]:
    return [SendEntry(str(i), json.dumps({"id": f"j{i}", "log": str(log), **extra})) for i in range(count)]


def _until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the worker"
        time.sleep(0.05)


def _run_in_thread(worker: durableq.Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run)
    thread.start()
    return thread


def _empty(queue: durableq.Queue) -> bool:
    stats = queue.stats()
    return stats.approximate_number_of_messages + stats.approximate_number_of_messages_not_visible == 0


def test_handled_messages_are_deleted(target: str, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs")
        queue.send_batch(_jobs(log, 10))
        queue.send_batch(
            [SendEntry(str(i), e.body.replace('"j', '"k')) for i, e in enumerate(_jobs(log, 10))]
        )
        worker = durableq.Worker(queue, worker_handlers.record, concurrency=4)
        thread = _run_in_thread(worker)
        _until(lambda: _empty(queue))
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()
    done = Counter(job for event, job, _, _ in events(str(log)) if event == "end")
    assert len(done) == 20 and set(done.values()) == {1}


def test_failures_retry_after_a_backoff_then_go_to_the_dead_letter_queue(
    target: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="durableq.worker")
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        dead = broker.create_queue("jobs-dlq")
        queue = broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 3))
        queue.send(json.dumps({"id": "bad", "log": str(log), "fail": True}))
        queue.send(json.dumps({"id": "good", "log": str(log)}))
        backoffs: list[int] = []

        def backoff(receive_count: int) -> int:
            backoffs.append(receive_count)
            return 0  # retry at once

        worker = durableq.Worker(queue, worker_handlers.record, backoff=backoff)
        thread = _run_in_thread(worker)
        _until(lambda: dead.stats().approximate_number_of_messages == 1)
        worker.stop()
        thread.join(30)
        [moved] = dead.receive()
        assert moved.dead_letter_source == "jobs" and moved.receive_count == 4
    attempts = [job for event, job, _, _ in events(str(log)) if event == "start"]
    assert attempts.count("bad") == 3 and attempts.count("good") == 1
    # The back-off grows with the receive count; the last allowed receive's failure has none:
    # the message is released at once, and the next receive moves it.
    assert backoffs == [1, 2]
    outcomes = [(r.job["outcome"], r.job["receive_count"]) for r in caplog.records if hasattr(r, "job")]
    assert sorted(outcomes) == [("dead-lettered", 3), ("done", 1), ("failed", 1), ("failed", 2)]
    [dead_lettered] = [r for r in caplog.records if getattr(r, "job", {}).get("outcome") == "dead-lettered"]
    assert dead_lettered.levelno == logging.ERROR
    assert dead_lettered.job["dead_letter_queue"] == "jobs-dlq"
    assert "moves to dead-letter queue jobs-dlq" in dead_lettered.getMessage()


def test_a_dead_letter_queue_that_is_gone_leaves_failures_to_their_backoff(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As in SQS, a message past its maximum receives stays in its queue when the dead-letter queue
    its redrive policy names is gone, and is received again: the worker retries it after its
    back-off like any failure, instead of releasing it at once to be received and fail again in a
    spin (issue 27: 857 runs in 4 s); the missing queue is logged once, not at every receive."""
    caplog.set_level(logging.INFO, logger="durableq")
    clock = FakeClock()
    calls: list[int] = []

    def fail(message: durableq.Message) -> None:
        calls.append(message.receive_count)
        raise RuntimeError("fails on purpose")

    with durableq.open(target, clock=clock, durability="normal") as broker:
        broker.create_queue("jobs-dlq")
        queue = broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 1))
        broker.delete_queue("jobs-dlq")
        queue.send("doomed")
        worker = durableq.Worker(queue, fail, wait_time=1)
        thread = _run_in_thread(worker)
        try:
            for receives in range(1, 5):
                # After each failure it is hidden for its back-off (2, 4, 8, 16 s of the broker clock)
                delay = durableq.worker.default_backoff(receives)
                due = int(clock() * 1000) + delay * 1000
                _until(lambda due=due: [m.visible_timestamp for m in queue.peek(state="in_flight")] == [due])
                assert calls == list(range(1, receives + 1))  # and is not received meanwhile
                clock.advance(delay)
            _until(lambda: len(calls) == 5)
        finally:
            worker.stop()
            thread.join(30)
    failed = [r.job for r in caplog.records if getattr(r, "job", {}).get("outcome") == "failed"]
    assert [(j["receive_count"], j["retry_in"]) for j in failed] == [(n, 2**n) for n in range(1, 6)]
    assert not [r for r in caplog.records if "dead-letter queue jobs-dlq" in r.getMessage()]
    [gone] = [r for r in caplog.records if "no longer exists" in r.getMessage()]
    assert gone.levelno == logging.WARNING and "'jobs-dlq'" in gone.getMessage()


def test_the_default_backoff_grows_and_is_capped() -> None:
    delays = [durableq.worker.default_backoff(n) for n in range(1, 20)]
    assert delays[:4] == [2, 4, 8, 16]
    assert delays == sorted(delays) and max(delays) == 900


def test_the_heartbeat_keeps_a_long_job_invisible(target: str, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs", visibility_timeout=1)
        queue.send(json.dumps({"id": "long", "log": str(log), "sleep": 3.5}))
        worker = durableq.Worker(queue, worker_handlers.record, heartbeat_interval=0.3)
        thread = _run_in_thread(worker)
        _until(lambda: events(str(log)))
        stolen = []
        while not any(e[0] == "end" for e in events(str(log))):
            stolen += queue.receive(wait_time=1)  # another consumer, well past the 1 s timeout
        _until(lambda: _empty(queue))
        worker.stop()
        thread.join(30)
    assert stolen == []
    assert [e[0] for e in events(str(log))] == ["start", "end"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"max_messages": 11}, "max_messages"),
        ({"wait_time": 21}, "wait_time"),
        ({"visibility_timeout": 0}, "visibility_timeout"),
        ({"grace_period": -1}, "grace_period"),
        ({"heartbeat_interval": 100}, "heartbeat_interval"),
    ],
)
def test_worker_arguments_are_checked(queue: durableq.Queue, kwargs: dict, match: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match=match):
        durableq.Worker(queue, worker_handlers.record, **kwargs)
    with pytest.raises(durableq.InvalidParameterValue, match="callable"):
        durableq.Worker(queue, "not a function")  # type: ignore[arg-type]


WORKER_SCRIPT = textwrap.dedent(
    """
    import logging, sys
    import durableq
    from tests import worker_handlers
    logging.basicConfig(level=logging.INFO)
    path, processes = sys.argv[1], sys.argv[2] == "processes"
    concurrency, grace = int(sys.argv[3]), float(sys.argv[4])
    with durableq.open(path) as broker:
        queue = broker.get_queue("jobs")
        durableq.Worker(queue, worker_handlers.record, concurrency=concurrency, processes=processes,
                        heartbeat_interval=0.3, grace_period=grace).run()
    print("stopped cleanly")
    """
)


def _start_worker(target: str, mode: str, concurrency: int, grace: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, target, mode, str(concurrency), str(grace)],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_mid_run_loses_nothing(target: str, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs", visibility_timeout=60)
        queue.send_batch(_jobs(log, 6, sleep=1.5))
        worker = _start_worker(target, "threads", 2, grace=0.3)
        _until(lambda: len(events(str(log))) >= 2)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        assert "stopped cleanly" in out and "Traceback" not in err
        done = {job for event, job, _, _ in events(str(log)) if event == "end"}
        stats = queue.stats()
        # Unfinished jobs were released at once (not left for the 60 s timeout); none was lost.
        assert stats.approximate_number_of_messages_not_visible == 0
        assert stats.approximate_number_of_messages + len(done) == 6
        assert "released" in err


def test_a_killed_worker_loses_nothing(target: str, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs", visibility_timeout=2)
        queue.send_batch(_jobs(log, 3, sleep=30))
        worker = _start_worker(target, "threads", 3, grace=0)
        _until(lambda: len(events(str(log))) == 3)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(30)
        _until(
            lambda: queue.stats().approximate_number_of_messages == 3, timeout=15
        )  # back after the timeout
        back = queue.receive(10)
    assert sorted(json.loads(m.body)["id"] for m in back) == ["j0", "j1", "j2"]
    assert {m.receive_count for m in back} == {2}  # received by the killed worker, then again here


def test_two_worker_processes_never_run_one_job_at_once(target: str, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs", visibility_timeout=1)
        for i in range(0, 30, 10):
            queue.send_batch(
                [
                    SendEntry(str(j), json.dumps({"id": f"j{j}", "log": str(log), "sleep": 0.2}))
                    for j in range(i, i + 10)
                ]
            )
        worker = _start_worker(target, "processes", 2, grace=5)
        _until(lambda: _empty(queue), timeout=60)
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
    runs: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
    for event, job, pid, at in events(str(log)):
        runs[job].append((event, pid, at))
    assert len(runs) == 30
    assert all([e for e, _, _ in r] == ["start", "end"] for r in runs.values())  # each job ran once
    assert len({pid for r in runs.values() for _, pid, _ in r}) == 2  # by two processes


def test_a_job_taken_by_someone_else_is_not_deleted(target: str, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    with durableq.open(target) as broker:
        queue = broker.create_queue("jobs", visibility_timeout=2)
        queue.send(json.dumps({"id": "contested", "log": str(log), "sleep": 4}))
        worker = _start_worker(target, "threads", 1, grace=5)
        _until(lambda: events(str(log)))
        os.kill(worker.pid, signal.SIGSTOP)  # freeze its heartbeat past the 2 s timeout
        try:
            [taken] = queue.receive(wait_time=10, visibility_timeout=60)
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        _until(lambda: any(e[0] == "end" for e in events(str(log))))
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
        assert "visibility not extended" in err and "not deleted" in err
        assert queue.stats().approximate_number_of_messages_not_visible == 1  # still ours
        queue.delete(taken.receipt_handle)


def test_the_heartbeat_extends_up_to_the_12_hour_cap_on_the_broker_clock(target: str) -> None:
    clock = FakeClock()
    started, release = threading.Event(), threading.Event()

    def handler(message: durableq.Message) -> None:
        started.set()
        assert release.wait(30)

    with durableq.open(target, clock=clock, durability="normal") as broker:
        queue = broker.create_queue("jobs", visibility_timeout=60)
        queue.send("a very long job")
        worker = durableq.Worker(queue, handler, heartbeat_interval=0.05)
        thread = _run_in_thread(worker)
        assert started.wait(30)
        received_at = int(clock() * 1000)
        clock.advance(43_200 - 30)  # 30 s before the cap, by the broker's clock
        cap = received_at + 43_200_000
        _until(lambda: [m.visible_timestamp for m in queue.peek(state="in_flight")] == [cap])
        release.set()
        _until(lambda: _empty(queue))  # the job finished within its cap: the message is deleted
        worker.stop()
        thread.join(30)


@pytest.mark.parametrize("ending", ["queue deleted", "broker closed"])
def test_a_worker_stops_with_the_error_when_its_queue_or_broker_is_gone(target: str, ending: str) -> None:
    broker = durableq.open(target, durability="normal")
    queue = broker.create_queue("jobs")
    worker = durableq.Worker(queue, lambda message: None, wait_time=1)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except durableq.DurableQError as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    if ending == "queue deleted":
        broker.delete_queue("jobs")
    else:
        broker.close()
    thread.join(60)
    assert not thread.is_alive(), "the worker kept retrying a receive that can never succeed"
    expected = durableq.QueueDoesNotExist if ending == "queue deleted" else durableq.BrokerClosed
    assert len(raised) == 1 and isinstance(raised[0], expected), raised
    broker.close()
