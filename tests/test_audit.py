"""The audit trail: every management call leaves one event, in the call's own transaction when it
succeeds and after it, with the error's code, when it fails; message calls leave none."""

from __future__ import annotations

import os
import pwd
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

import durableq
from durableq import RedrivePolicy
from tests.conftest import FakeClock


def _actions(
    broker: durableq.Broker, **filters: object
) -> list[tuple[str, str | None, str, dict[str, object]]]:
    return [(e.action, e.queue, e.outcome, e.detail) for e in broker.audit(**filters)]  # type: ignore[arg-type]


def test_every_management_call_is_recorded_with_what_it_changed(broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    dlq = broker.create_queue("jobs-dlq")
    jobs.set_attributes(visibility_timeout=60, redrive_policy=RedrivePolicy("jobs-dlq", 1))
    jobs.tag(team="a", env="b")
    jobs.untag("env")
    jobs.add_permission("readers", ["123456789012"], ["ReceiveMessage"])
    jobs.remove_permission("readers")
    jobs.send("x")
    jobs.receive()  # message calls leave no event
    jobs.purge()
    dlq.send("dead")
    task = broker.start_message_move("jobs-dlq", "jobs")
    broker.wait_for_message_move(task.task_handle, 30)
    broker.delete_queue("jobs")
    assert _actions(broker) == [
        ("CreateQueue", "jobs", "OK", {"created": True}),
        ("CreateQueue", "jobs-dlq", "OK", {"created": True}),
        ("SetQueueAttributes", "jobs", "OK", {"attributes": ["redrive_policy", "visibility_timeout"]}),
        ("TagQueue", "jobs", "OK", {"keys": ["env", "team"]}),
        ("UntagQueue", "jobs", "OK", {"keys": ["env"]}),
        ("AddPermission", "jobs", "OK", {"label": "readers"}),
        ("RemovePermission", "jobs", "OK", {"label": "readers"}),
        ("PurgeQueue", "jobs", "OK", {"purged": 1}),
        (
            "StartMessageMoveTask",
            "jobs-dlq",
            "OK",
            {"task_handle": task.task_handle, "destination": "jobs", "max_per_second": None},
        ),
        ("DeleteQueue", "jobs", "OK", {}),
    ]


def test_an_event_says_who_and_when(broker: durableq.Broker, clock: FakeClock) -> None:
    broker.create_queue("jobs")
    (event,) = broker.audit()
    assert event.pid == os.getpid()
    assert event.user == pwd.getpwuid(os.getuid()).pw_name
    assert event.at.timestamp() == clock()
    assert event.event_id >= 1


def test_a_refused_call_is_recorded_with_its_code_and_changes_nothing(broker: durableq.Broker) -> None:
    broker.create_queue("jobs", visibility_timeout=30)
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.delete_queue("missing")
    with pytest.raises(durableq.QueueNameExists):
        broker.create_queue("jobs", visibility_timeout=60)
    with pytest.raises(durableq.InvalidAttributeValue):
        broker.get_queue("jobs").set_attributes(visibility_timeout=-1)
    with pytest.raises(durableq.InvalidParameterValue):
        broker.create_queue("bad name!")
    assert _actions(broker)[1:] == [
        ("DeleteQueue", "missing", "QueueDoesNotExist", {}),
        ("CreateQueue", "jobs", "QueueNameExists", {}),
        ("SetQueueAttributes", "jobs", "InvalidAttributeValue", {}),
        ("CreateQueue", "bad name!", "InvalidParameterValue", {}),
    ]
    assert broker.get_queue("jobs").attributes()["visibility_timeout"] == 30


def test_the_event_commits_with_the_change(db_path: Path) -> None:
    """A purge that cannot commit leaves neither its change nor an OK event."""
    with durableq.open(db_path, busy_timeout=0.2) as broker:
        jobs = broker.create_queue("jobs")
        jobs.send("kept")
        other = sqlite3.connect(db_path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the busy timeout
        with pytest.raises(durableq.DatabaseLocked):
            jobs.purge()
        other.execute("ROLLBACK")
        assert [m.body for m in jobs.peek()] == ["kept"]
        assert [e.action for e in broker.audit()] == ["CreateQueue"]  # the file's trouble is not recorded


def test_filters_and_resuming(broker: durableq.Broker, clock: FakeClock) -> None:
    broker.create_queue("a")
    clock.advance(3600)
    broker.create_queue("b")
    broker.get_queue("a").purge()
    assert [e.action for e in broker.audit(queue="a")] == ["CreateQueue", "PurgeQueue"]
    an_hour_ago = broker.audit()[1].at - timedelta(minutes=1)
    assert [e.queue for e in broker.audit(since=an_hour_ago)] == ["b", "a"]
    first, *rest = broker.audit()
    assert broker.audit(after=first.event_id) == rest
    assert len(broker.audit(limit=1)) == 1


@pytest.mark.parametrize(
    ("filters", "words"),
    [
        ({"limit": 0}, "limit must be"),
        ({"after": -1}, "after must be"),
        ({"since": "yesterday"}, "since must be a datetime"),
        ({"queue": 5}, "queue"),
    ],
)
def test_bad_filters_are_refused(broker: durableq.Broker, filters: dict[str, object], words: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match=words):
        broker.audit(**filters)  # type: ignore[arg-type]


def test_a_refused_name_that_cannot_be_stored_is_recorded_escaped(broker: durableq.Broker) -> None:
    with pytest.raises(durableq.InvalidParameterValue):
        broker.delete_queue("bad\ud800name" + "x" * 100)
    (event,) = broker.audit()
    assert (event.action, event.outcome) == ("DeleteQueue", "InvalidParameterValue")
    assert event.queue is not None and event.queue.startswith("bad\\ud800namex")


VIRTUAL_QUEUE_CALLS = {
    "SetQueueAttributes": lambda q: q.set_attributes(visibility_timeout=5),
    "PurgeQueue": lambda q: q.purge(),
    "TagQueue": lambda q: q.tag(team="a"),
    "UntagQueue": lambda q: q.untag("team"),
    "AddPermission": lambda q: q.add_permission("readers", ["123456789012"], ["ReceiveMessage"]),
    "RemovePermission": lambda q: q.remove_permission("readers"),
}


@pytest.mark.parametrize("action", VIRTUAL_QUEUE_CALLS)
def test_a_management_call_refused_by_a_virtual_queue_is_recorded(
    broker: durableq.Broker, action: str
) -> None:
    """A virtual queue has no settings, tags or permissions of its own: its refusal is a refused call too."""
    virtual = broker.create_queue("host").virtual_queue("v")
    with pytest.raises(durableq.UnsupportedOperation):
        VIRTUAL_QUEUE_CALLS[action](virtual)
    assert _actions(broker)[1:] == [(action, "host#v", "UnsupportedOperation", {})]


def test_a_refusal_before_the_library_call_is_recorded_once(broker: durableq.Broker) -> None:
    """What the CLI and the endpoint do: look the queue up and check their own arguments, then call."""
    jobs = broker.create_queue("jobs")
    with pytest.raises(durableq.QueueDoesNotExist):  # refused before the call: the boundary records it
        with broker.management_call("PurgeQueue", "missing"):
            broker.get_queue("missing").purge()
    with pytest.raises(durableq.InvalidAttributeValue):  # refused by the call: its own row, only
        with broker.management_call("SetQueueAttributes", "jobs"):
            broker.get_queue("jobs").set_attributes(visibility_timeout=-1)
    with pytest.raises(durableq.MissingParameter):  # the call succeeded, then the caller failed: no refusal
        with broker.management_call("TagQueue", "jobs"):
            jobs.tag(team="a")
            raise durableq.MissingParameter("after the call")
    with pytest.raises(ValueError):  # not a durableq error: not a refusal (a bug of the caller)
        with broker.management_call("PurgeQueue", "jobs"):
            raise ValueError("a bug")
    assert _actions(broker)[1:] == [
        ("PurgeQueue", "missing", "QueueDoesNotExist", {}),
        ("SetQueueAttributes", "jobs", "InvalidAttributeValue", {}),
        ("TagQueue", "jobs", "OK", {"keys": ["team"]}),
    ]


def test_a_boundary_can_say_which_of_its_own_errors_are_refusals(broker: durableq.Broker) -> None:
    class Refused(Exception):
        pass

    with pytest.raises(Refused):
        with broker.management_call(
            "DeleteQueue", "a\nb", code_of=lambda exc: "Refused" if isinstance(exc, Refused) else None
        ):
            raise Refused
    assert _actions(broker) == [("DeleteQueue", "a\nb", "Refused", {})]


@pytest.mark.parametrize("name", ["nul\x00name", "bad\ud800name", "line\nbreak"])
def test_any_refused_name_can_be_recorded(broker: durableq.Broker, name: str) -> None:
    """A refused name is kept as far as the engine can store it (PostgreSQL's text holds no NUL)."""
    with pytest.raises(durableq.InvalidParameterValue):
        broker.create_queue(name)
    (event,) = broker.audit()
    assert (event.action, event.outcome) == ("CreateQueue", "InvalidParameterValue")
    assert event.queue == name.replace("\x00", "\\x00").replace("\ud800", "\\ud800")
