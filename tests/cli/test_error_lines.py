"""Every refusal is one ``error: CODE: message`` line (exit status 1) that names what the user
typed: the command's options, not the library's keywords."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from durableq.cli import main
from durableq.cli.base import cli_words

import durableq

from .conftest import Run
from .test_executable import _executable

#: The one line of a refusal.
ERROR_LINE = re.compile(r"error: [A-Z][A-Za-z]+: \S.*\n")


def _refused(run: Run, *args: str) -> str:
    """Run a command that must be refused; returns its one error line (without ``error: ``)."""
    result = run(*args, code=1)
    assert ERROR_LINE.fullmatch(result.stderr), result.stderr
    assert "a bug in durableq" not in result.stderr
    return result.stderr.removeprefix("error: ").rstrip("\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # Library keywords (fifo=True, set_attributes, max_messages, ...) once appeared here.
        (
            ("queue", "create", "jobs.fifo"),
            "InvalidParameterValue: queue name 'jobs.fifo' ends in .fifo, which only FIFO queues may use; "
            "pass --fifo to create a FIFO queue",
        ),
        (
            ("queue", "create", "jobs", "--visibility-timeout", "60"),
            "QueueNameExists: queue 'jobs' exists with other attributes (--visibility-timeout); "
            "use `durableq queue set` to change them or another name",
        ),
        (
            ("queue", "create", "other", "--retention", "1"),
            "InvalidAttributeValue: --retention must be from 60 to 1209600 seconds; got 1",
        ),
        (
            ("queue", "create", "other", "--dlq", "jobs", "--max-receives", "0"),
            "InvalidAttributeValue: --max-receives must be from 1 to 1000 receives; got 0",
        ),
        (
            ("queue", "create", "other", "--content-dedup"),
            "InvalidAttributeName: --content-dedup applies to FIFO queues only; 'other' is a standard queue",
        ),
        (
            ("send", "jobs", "hello", "--delay", "901"),
            "InvalidParameterValue: --delay must be from 0 to 900 seconds; got 901",
        ),
        (
            ("send", "jobs", "hello", "--dedup-id", "d"),
            "InvalidParameterValue: --dedup-id applies to FIFO queues only; 'jobs' is a standard queue",
        ),
        (
            ("send", "orders.fifo", "hello"),
            "MissingParameter: --group is required for every message sent to FIFO queue 'orders.fifo'",
        ),
        (
            ("receive", "jobs", "-n", "11"),
            "InvalidParameterValue: --max-messages must be from 1 to 10 messages; got 11",
        ),
        (
            ("receive", "jobs", "--wait", "21"),
            "InvalidParameterValue: --wait must be from 0 to 20 seconds; got 21",
        ),
        (
            ("receive", "jobs", "--visibility-timeout", "43201"),
            "InvalidParameterValue: --visibility-timeout must be from 0 to 43200 seconds; got 43201",
        ),
        (
            ("redrive", "jobs", "--rate", "0"),
            "InvalidParameterValue: --rate must be from 1 to 500 messages per second; got 0",
        ),
        (
            ("worker", "jobs", "tests.worker_handlers:record", "--grace-period", "-1"),
            "InvalidParameterValue: --grace-period must be a number from 0 to 86400 seconds; got -1.0",
        ),
    ],
)
def test_messages_name_the_options_of_the_command(
    run: Run, broker: durableq.Broker, args: tuple[str, ...], line: str
) -> None:
    broker.create_queue("jobs")
    broker.create_queue("orders.fifo", fifo=True)
    assert _refused(run, *args) == line


def test_a_line_of_a_file_names_its_key_and_the_option(
    run: Run, broker: durableq.Broker, tmp_path: Path
) -> None:
    broker.create_queue("orders.fifo", fifo=True)
    lines = tmp_path / "orders.jsonl"
    lines.write_text('{"body": "created", "dedup_id": "o-1"}\n', encoding="utf-8")
    result = run("send", "orders.fifo", "--file", str(lines), code=1)
    # A FIFO batch with a message lacking its group is refused whole (as SQS does): nothing was sent.
    assert result.stderr.splitlines() == [
        'error: MissingParameter: --group (or "group" in the line) is required for every message sent '
        "to FIFO queue 'orders.fifo' (sent 0 messages; line 1 on were not sent)",
    ]


def test_queue_set_keeps_the_setting_names_it_takes(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    # `queue set` takes the library's names (KEY=VALUE), so its messages keep them.
    assert _refused(run, "queue", "set", "jobs", "visibility_timeout=99999") == (
        "InvalidAttributeValue: visibility_timeout must be from 0 to 43200 seconds; got 99999"
    )


def test_values_are_never_reworded() -> None:
    words = {"delay_seconds": "--delay"}
    error = durableq.InvalidParameterValue(
        template="{parameter} of {value!r} is bad", parameter="delay_seconds", value="delay_seconds"
    )
    assert cli_words(error, words) == "--delay of 'delay_seconds' is bad"
    hint = durableq.InvalidParameterValue(template="pass {fifo=True} for {value!r}", value="fifo=True")
    assert cli_words(hint) == "pass --fifo for 'fifo=True'"
    # Only the names the error marks as such: a plain message is left as it is.
    plain = durableq.InvalidParameterValue("max_delay_seconds and delay_seconds are named here")
    assert cli_words(plain, words) == plain.message


@pytest.mark.sqlite_only("a missing SQLite file; a PostgreSQL database is made by its server's administrator")
def test_a_missing_database_has_the_documented_form(run: Run, db: Path) -> None:
    assert _refused(run, "stats") == (
        f"NotADurableQDatabase: no durableq database at {db}: create one with durableq init"
    )
    assert not db.exists()


# -- every number an option takes --------------------------------------------------------

#: Arguments that make each command reach its options (queues created by the test).
_ARGUMENTS = {
    "change-visibility": ["jobs", "2.1.0000000000000000.0000000000000000"],
    "send": ["jobs", "hello"],
    "worker": ["jobs", "tests.worker_handlers:record"],
    "redrive": ["jobs-dlq"],
    "analyze": [],
    "export": ["out"],
}
#: Numbers no option allows: too large for any machine type, negative, not a number.
_BAD_NUMBERS = {
    int: ["999999999999999999999999", "-1"],
    float: ["1e400", "-1", "nan"],
}


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        else:
            yield (*path, name)


def _numeric_cases() -> Iterator[tuple[tuple[str, ...], str, str]]:
    for path in _leaves(main):
        command = main
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        for param in command.params:
            kind = {click.INT: int, click.FLOAT: float}.get(param.type)  # type: ignore[call-overload]
            if kind is None or not isinstance(param, click.Option):
                continue
            for value in _BAD_NUMBERS[kind]:
                yield path, param.opts[-1], value


@pytest.mark.parametrize(("path", "option", "value"), list(_numeric_cases()))
def test_every_bad_number_is_one_line_with_a_code(
    run: Run, broker: durableq.Broker, path: tuple[str, ...], option: str, value: str
) -> None:
    broker.create_queue("jobs-dlq")
    broker.create_queue("jobs", redrive_policy=durableq.RedrivePolicy("jobs-dlq", 3))
    arguments = _ARGUMENTS.get(
        path[-1], ["jobs"] if path[0] in ("receive", "peek", "stats", "delete", "events", "call") else []
    )
    if path[-1] == "create":
        arguments = ["other"] + (["--dlq", "jobs-dlq"] if option == "--max-receives" else [])
    if path[0] == "schedule":  # NAME (and for create: QUEUE EXPRESSION BODY)
        arguments = ["other", "jobs", "rate(1 minute)", "x"] if path[-1] == "create" else ["other"]
    result = run(*path, *arguments, f"{option}={value}", code=1)
    assert ERROR_LINE.fullmatch(result.stderr), result.stderr
    assert "a bug in durableq" not in result.stderr


@pytest.mark.parametrize("seconds", ["999999999999999999999999", "-1"])
def test_change_visibility_refuses_bad_seconds_in_one_line(
    run: Run, broker: durableq.Broker, seconds: str
) -> None:
    queue = broker.create_queue("jobs")
    queue.send("hello")
    [message] = queue.receive()
    line = _refused(run, "change-visibility", "jobs", message.receipt_handle, "--", seconds)
    assert line.startswith("InvalidParameterValue: visibility timeout must be from 0 to 43200 seconds")


# -- db upgrade ---------------------------------------------------------------------------


def test_db_upgrade_to_an_unknown_revision_is_refused(run: Run) -> None:
    run("init")
    # Once "unexpected CommandError ... (a bug in durableq)".
    line = _refused(run, "db", "upgrade", "nope")
    assert line.startswith(
        "InvalidParameterValue: unknown schema revision 'nope'; REVISION is head or one of "
    )
    assert _refused(run, "db", "upgrade", "+1").startswith(
        "InvalidParameterValue: unknown schema revision '+1'"
    )


def test_db_upgrade_never_goes_back(run: Run, location: str) -> None:
    run("init")
    with durableq.open(location):
        pass
    history = [line.split()[0] for line in run("db", "history").stdout.splitlines()[1:]]
    head, oldest = history[0], history[-1]
    if head == oldest:
        pytest.fail("this test needs two schema revisions")
    assert run("db", "upgrade", oldest).stdout == (
        f"already at {head}, which is newer than {oldest} (upgrade never goes back)\n"
    )


# -- serve on a busy port -------------------------------------------------------------------


def test_serve_on_a_busy_port_names_it_and_the_option(db: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [_executable(), "--db", str(db), "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: InvalidParameterValue: port {port} on 127.0.0.1 is already in use "
        "(another program listens there); pass another --port (0 picks a free one)\n"
    )
