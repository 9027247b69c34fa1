"""durableq audit: the management calls made through the CLI (or anything else), as a table or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import durableq

from .conftest import Run


def test_the_cli_shows_what_was_done_and_what_was_refused(run: Run) -> None:
    run("queue", "create", "orders")
    run("queue", "tag", "orders", "team=payments")
    run("queue", "delete", "missing", code=1)
    run("queue", "purge", "orders")
    events = json.loads(run("audit", "--json").stdout)
    assert [(e["action"], e["queue"], e["outcome"]) for e in events] == [
        ("CreateQueue", "orders", "OK"),
        ("TagQueue", "orders", "OK"),
        ("DeleteQueue", "missing", "QueueDoesNotExist"),
        ("PurgeQueue", "orders", "OK"),
    ]
    assert events[1]["detail"] == {"keys": ["team"]}
    text = run("audit", "--queue", "orders", "--after", str(events[0]["event_id"])).stdout
    lines = text.splitlines()
    assert lines[0].split() == ["id", "time", "action", "queue", "outcome", "user", "pid", "detail"]
    assert [line.split()[4] for line in lines[1:]] == [
        "TagQueue",
        "PurgeQueue",
    ]  # id, date, time, UTC, action
    assert run("audit", "--since", "2999-01-01").stdout.strip() == "no audit events"


def test_bad_options_name_the_option(run: Run) -> None:
    assert run("audit", "--limit", "0", code=1).stderr.startswith(
        "error: InvalidParameterValue: --limit must be"
    )
    assert run("audit", "--after", "-1", code=1).stderr.startswith(
        "error: InvalidParameterValue: --after must be"
    )


#: A refused call of every management command: (command line, the row it leaves).
REFUSED = {
    "create, bad name": (
        ["queue", "create", "bad name!"],
        ("CreateQueue", "bad name!", "InvalidParameterValue"),
    ),
    "create, bad setting": (
        ["queue", "create", "fresh", "--visibility-timeout", "999999"],
        ("CreateQueue", "fresh", "InvalidAttributeValue"),
    ),
    "create, bad key alias": (
        ["queue", "create", "fresh", "--kms-key", "bad alias!"],
        ("CreateQueue", "fresh", "InvalidParameterValue"),
    ),
    "set, missing queue": (
        ["queue", "set", "missing", "visibility_timeout=5"],
        ("SetQueueAttributes", "missing", "QueueDoesNotExist"),
    ),
    "set, bad queue name": (
        ["queue", "set", "bad name!", "visibility_timeout=5"],
        ("SetQueueAttributes", "bad name!", "InvalidParameterValue"),
    ),
    "set, bad setting": (
        ["queue", "set", "jobs", "visibility_timeout=-1"],
        ("SetQueueAttributes", "jobs", "InvalidAttributeValue"),
    ),
    "set, unknown setting": (
        ["queue", "set", "jobs", "bogus=1"],
        ("SetQueueAttributes", "jobs", "InvalidAttributeName"),
    ),
    "delete, missing queue": (
        ["queue", "delete", "missing"],
        ("DeleteQueue", "missing", "QueueDoesNotExist"),
    ),
    "purge, missing queue": (["queue", "purge", "missing"], ("PurgeQueue", "missing", "QueueDoesNotExist")),
    "tag, missing queue": (["queue", "tag", "missing", "k=v"], ("TagQueue", "missing", "QueueDoesNotExist")),
    "tag, bad tag": (["queue", "tag", "jobs", "k!=v"], ("TagQueue", "jobs", "InvalidParameterValue")),
    "untag, missing queue": (
        ["queue", "untag", "missing", "k"],
        ("UntagQueue", "missing", "QueueDoesNotExist"),
    ),
    "redrive, missing queue": (
        ["redrive", "missing"],
        ("StartMessageMoveTask", "missing", "QueueDoesNotExist"),
    ),
    "cancel, unknown task": (
        ["moves", "cancel", "no-such-task"],
        ("CancelMessageMoveTask", None, "ResourceNotFoundException"),
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_every_refused_management_command_leaves_one_row(
    run: Run, broker: durableq.Broker, case: str
) -> None:
    command, row = REFUSED[case]
    broker.create_queue("jobs")
    (created,) = broker.audit()
    result = run(*command, code=1)
    assert result.stderr.startswith(f"error: {row[2]}: ") and result.stderr.count("\n") == 1
    assert [(e.action, e.queue, e.outcome) for e in broker.audit(after=created.event_id)] == [row]


def test_control_characters_are_escaped_in_the_audit_table_and_error_lines(
    run: Run, broker: durableq.Broker
) -> None:
    """A refused name or a tag key with a line break cannot forge a line of `durableq audit`."""
    broker.create_queue("jobs")
    forged = "x\n2099-01-01 00:00:00 UTC  DeleteQueue  jobs  OK"
    refused = run("queue", "delete", forged, code=1)
    assert refused.stderr.count("\n") == 1 and "\\n2099" in refused.stderr
    run("queue", "untag", "jobs", "k\r\x1b[2Jey")
    lines = run("audit").stdout.splitlines()
    assert len(lines) == 1 + 3  # the header and one line per event
    assert "x\\n2099-01-01" in lines[2] and "k\\r\\x1b[2Jey" in lines[3]
    events = json.loads(run("audit", "--json").stdout)  # the JSON keeps the exact text
    assert events[1]["queue"] == forged and events[2]["detail"] == {"keys": ["k\r\x1b[2Jey"]}


def test_a_command_line_that_does_not_parse_is_no_call(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    run("queue", "create", "other", "--dlq", "jobs", code=2)  # --max-receives missing
    run("queue", "set", "jobs", "not-a-setting", code=2)
    assert [e.action for e in broker.audit()] == ["CreateQueue"]


@pytest.mark.sqlite_only("a database file that does not exist yet")
def test_a_refusal_before_a_new_file_is_made_leaves_no_file(run: Run, db: Path) -> None:
    run("queue", "create", "jobs", "--dlq", "jobs-dlq", code=2)
    run("queue", "create", "jobs", "--kms-key", "bad alias!", code=1)
    assert not db.exists()
    run("queue", "create", "bad name!", code=1)  # the library's refusal: the file is made, with its row
    with durableq.open(db) as broker:
        assert [(e.action, e.outcome) for e in broker.audit()] == [("CreateQueue", "InvalidParameterValue")]
