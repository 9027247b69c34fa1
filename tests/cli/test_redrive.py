"""redrive (a message move task with progress) and moves list / cancel."""

from __future__ import annotations

import json

import pytest

import durableq
from durableq import RedrivePolicy

from .conftest import Run


def _dead_letters(broker: durableq.Broker, count: int) -> durableq.Queue:
    """A queue 'jobs' whose ``count`` messages have all moved to 'jobs-dlq' (no waiting: visibility 0)."""
    broker.create_queue("jobs-dlq")
    jobs = broker.create_queue("jobs", visibility_timeout=0, redrive_policy=RedrivePolicy("jobs-dlq", 1))
    for i in range(count):
        jobs.send(f"m{i}")
    while jobs.receive(10):  # a second receive of each moves it
        pass
    assert broker.get_queue("jobs-dlq").stats().approximate_number_of_messages == count
    return jobs


def test_redrive_moves_dead_letters_back(run: Run, broker: durableq.Broker) -> None:
    jobs = _dead_letters(broker, 3)
    task = json.loads(run("redrive", "jobs-dlq", "--json").stdout)
    assert (task["status"], task["moved"], task["to_move"], task["source"]) == ("COMPLETED", 3, 3, "jobs-dlq")
    assert sorted(m.body for m in jobs.peek()) == ["m0", "m1", "m2"]
    assert broker.get_queue("jobs-dlq").peek() == []
    listed = json.loads(run("moves", "list", "jobs-dlq", "--json").stdout)
    assert [t["task_handle"] for t in listed] == [task["task_handle"]]
    table = run("moves", "list", "jobs-dlq").stdout
    assert task["task_handle"] in table and "COMPLETED" in table


def test_redrive_to_another_queue_at_a_rate(run: Run, broker: durableq.Broker) -> None:
    _dead_letters(broker, 2)
    retry = broker.create_queue("retry")
    text = run("redrive", "jobs-dlq", "--to", "retry", "--rate", "100").stdout
    assert text == "COMPLETED: moved 2 of 2 messages from jobs-dlq to retry\n"
    assert sorted(m.body for m in retry.peek()) == ["m0", "m1"]


def test_a_failed_task_exits_1(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs-dlq").send("never dead-lettered: it has no source queue")
    broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 3))
    result = run("redrive", "jobs-dlq", code=1)
    assert result.stdout.startswith("FAILED: moved 0 of 1 messages")
    assert result.stderr == (
        "error: MessageMoveFailed: the message move task failed: "
        "a message has no source queue to go back to; name a destination\n"
    )


def test_redrive_of_no_queues_dead_letter_queue_is_refused(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("plain")
    result = run("redrive", "plain", code=1)
    assert result.stderr.startswith("error: InvalidParameterValue: 'plain' is no queue's dead-letter queue")
    assert result.stderr.count("\n") == 1


def test_ctrl_c_cancels_the_task(run: Run, broker: durableq.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _dead_letters(broker, 3)
    real_wait = durableq.Broker.wait_for_message_move
    interrupted: list[str] = []

    def wait(self: durableq.Broker, task_handle: str, timeout: float | None = None) -> None:
        if not interrupted:
            interrupted.append(task_handle)
            raise KeyboardInterrupt  # Ctrl-C while the first (rate-limited) batch waits
        real_wait(self, task_handle, timeout)

    monkeypatch.setattr(durableq.Broker, "wait_for_message_move", wait)
    result = run("redrive", "jobs-dlq", "--rate", "1", "--json", code=1)
    task = json.loads(result.stdout)
    assert task["status"] == "CANCELLED" and task["moved"] < 3
    assert "was cancelled; run `durableq redrive jobs-dlq` to move the rest" in result.stderr
    assert len(jobs.peek()) == task["moved"]


def test_moves_cancel_and_its_errors(run: Run, broker: durableq.Broker) -> None:
    _dead_letters(broker, 1)
    done = broker.start_message_move("jobs-dlq")
    broker.wait_for_message_move(done.task_handle)
    finished = run("moves", "cancel", done.task_handle, code=1)
    assert finished.stderr.startswith("error: InvalidParameterValue: message move task ")
    unknown = run("moves", "cancel", "no-such-task", code=1)
    assert unknown.stderr.startswith("error: ResourceNotFoundException: ")
    assert run("moves", "list", "jobs", "--json").stdout == "[]\n"
    assert run("moves", "list", "jobs").stdout == "no message move tasks\n"


def test_moves_cancel_a_running_task(run: Run, broker: durableq.Broker) -> None:
    _dead_letters(broker, 3)
    task = broker.start_message_move("jobs-dlq", max_per_second=1)  # runs in this test's broker
    cancelled = json.loads(run("moves", "cancel", task.task_handle, "--json").stdout)
    assert cancelled["status"] in ("CANCELLING", "CANCELLED")
    broker.wait_for_message_move(task.task_handle)
    (final,) = broker.list_message_moves("jobs-dlq")
    assert final.status == "CANCELLED"
