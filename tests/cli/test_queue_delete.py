"""`queue delete` says how many messages went with the queue, and asks first on a terminal when the
queue holds any (`--yes` does not ask); a script (stdin not a terminal) deletes without asking, as
SQS's DeleteQueue does, and is told the count."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import durableq
from tests.cli.conftest import Run
from tests.cli.test_executable import _executable


def _filled(broker: durableq.Broker, name: str, count: int) -> None:
    queue = broker.create_queue(name)
    for i in range(count):
        queue.send(str(i))


def test_a_script_deletes_and_is_told_the_count(run: Run, broker: durableq.Broker) -> None:
    _filled(broker, "jobs", 25)
    broker.get_queue("jobs").receive(max_messages=3)  # in flight: gone with the queue all the same
    assert run("queue", "delete", "jobs").stdout == "deleted queue jobs and its 25 messages\n"
    assert broker.list_queues() == []
    broker.create_queue("empty")
    assert json.loads(run("queue", "delete", "empty", "--json").stdout) == {"deleted": "empty", "messages": 0}


def _on_a_terminal(location: str, *args: str, answer: str) -> tuple[int, str, str]:
    """``durableq --db LOCATION ARGS`` with its stdin on a terminal that types ``answer``."""
    main, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [_executable(), "--db", location, *args],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(main, answer.encode())  # the terminal keeps it until the command reads
        out, err = process.communicate(timeout=60)
    finally:
        os.close(main)
        os.close(terminal)
    return process.returncode, out, err


def test_a_terminal_is_asked_first_when_the_queue_holds_messages(
    location: str, broker: durableq.Broker, db: Path
) -> None:
    _filled(broker, "jobs", 3)
    code, out, err = _on_a_terminal(location, "queue", "delete", "jobs", answer="n\n")
    assert (code, out) == (1, "")
    assert err == (
        "Delete queue jobs and its 3 messages? [y/N]: "
        "error: Cancelled: queue jobs was not deleted (it holds 3 messages)\n"
    )
    assert broker.list_queues() == ["jobs"]
    code, out, err = _on_a_terminal(location, "queue", "delete", "jobs", answer="y\n")
    assert (code, out) == (0, "deleted queue jobs and its 3 messages\n")
    assert err == "Delete queue jobs and its 3 messages? [y/N]: "
    assert broker.list_queues() == []


def test_yes_and_an_empty_queue_are_not_asked(location: str, broker: durableq.Broker) -> None:
    _filled(broker, "jobs", 2)
    broker.create_queue("empty")
    for args, said in (
        (("jobs", "--yes"), "jobs and its 2 messages"),
        (("empty",), "empty (it held no messages)"),
    ):
        assert _on_a_terminal(location, "queue", "delete", *args, answer="") == (
            0,
            f"deleted queue {said}\n",
            "",
        )
    assert broker.list_queues() == []
