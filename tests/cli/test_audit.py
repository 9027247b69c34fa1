"""durableq audit: the management calls made through the CLI (or anything else), as a table or JSON."""

from __future__ import annotations

import json

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
