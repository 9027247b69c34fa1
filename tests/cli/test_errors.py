"""Errors: one line on stderr, exit status 1 when refused and 2 for bad usage, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import durableq

from .conftest import Run


def test_a_refused_operation_is_one_line_with_the_library_code(run: Run, broker: durableq.Broker) -> None:
    result = run("receive", "x", code=1)
    assert result.stdout == ""
    assert result.stderr == "error: QueueDoesNotExist: queue 'x' does not exist\n"


@pytest.mark.parametrize(
    "args",
    [
        ("no-such-command",),
        ("queue",),  # a group without its command
        ("queue", "create"),  # a missing argument
        ("receive", "jobs", "--no-such-option"),
        ("receive", "jobs", "-n", "many"),
        ("peek", "jobs", "--state", "sleeping"),
        ("queue", "list", "extra"),
        ("change-visibility", "jobs", "receipt"),
    ],
)
def test_bad_usage_exits_2(run: Run, broker: durableq.Broker, args: tuple[str, ...]) -> None:
    result = run(*args, code=2)
    assert result.stdout == "" or result.stdout.startswith("Usage:")


def test_export_names_its_one_format(run: Run, broker: durableq.Broker) -> None:
    """``--format`` says what export writes; anything but Parquet is refused before Spark starts."""
    result = run("export", "--format", "csv", "out", code=2)
    assert "'csv' is not 'parquet'" in result.output
    assert "Parquet, the one export writes" in run("export", "--help").output


def test_json_goes_after_the_command(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    # The line shows where it goes (tests/cli/test_option_places.py has the details).
    assert "a command's options go after its name: " in run("--json", "queue", "list", code=2).stderr
    assert json.loads(run("queue", "list", "--json").stdout) == ["jobs"]


def test_an_unexpected_error_is_still_one_line(
    run: Run, broker: durableq.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: durableq.Broker, prefix: str = "") -> list[str]:
        raise RuntimeError("boom")

    monkeypatch.setattr(durableq.Broker, "list_queues", broken)
    result = run("queue", "list", code=1)
    assert (
        result.stderr
        == "error: InternalFailure: unexpected RuntimeError: boom (a bug in durableq; please report it)\n"
    )


def test_a_file_that_cannot_be_read_is_one_line(run: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'"caf\xe9"\n')  # Latin-1, not UTF-8
    run("queue", "create", "jobs")
    result = run("send", "jobs", "--file", str(bad), code=1)
    assert result.stderr.startswith(
        "error: InvalidParameterValue: the input is not UTF-8 text (invalid continuation byte"
    )
    assert result.stderr.count("\n") == 1


@pytest.mark.sqlite_only("a directory where the SQLite file should be")
def test_a_directory_as_database(run: Run, tmp_path: Path) -> None:
    # --db takes a URL too, so click no longer checks the path (once exit 2): the library refuses it.
    result = run("--db", str(tmp_path), "queue", "list", code=1)
    assert (
        result.stderr
        == f"error: DatabaseError: {tmp_path} is a directory; give the path of a database file\n"
    )


@pytest.mark.sqlite_only("backup copies a SQLite file")
def test_a_line_break_in_what_the_user_gave_stays_in_the_one_line(run: Run, broker: durableq.Broker) -> None:
    """A path (or anything the message repeats) with a line break cannot add a forged line."""
    result = run("backup", "/no-such-folder\nerror: Forged: x/copy.db", code=1)
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: InvalidParameterValue: ")
    assert "/no-such-folder\\nerror: Forged: x/copy.db" in result.stderr


def test_an_unexpected_error_with_a_line_break_is_still_one_line(
    run: Run, broker: durableq.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: durableq.Broker, prefix: str = "") -> list[str]:
        raise RuntimeError("boom\r\nerror: Forged: x")

    monkeypatch.setattr(durableq.Broker, "list_queues", broken)
    assert run("queue", "list", code=1).stderr == (
        "error: InternalFailure: unexpected RuntimeError: boom\\r\\nerror: Forged: x "
        "(a bug in durableq; please report it)\n"
    )
