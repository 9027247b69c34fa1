"""send --file: JSON lines in batches, per-line failures, defaults, and the progress bar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import durableq
from durableq import Attribute

from .conftest import Run

BINARY = {"data_type": "Binary", "value": "aGk="}  # b"hi"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_sends_every_line_and_reports_the_ones_that_failed(
    run: Run, broker: durableq.Broker, tmp_path: Path
) -> None:
    jobs = broker.create_queue("jobs")
    good = [json.dumps(f"m{i}") for i in range(23)]
    lines = [
        *good[:5],
        "",  # blank: skipped, but still counts for the line numbers
        "not json",
        json.dumps({"body": "with attributes", "attributes": {"n": 5, "s": "x", "b": BINARY}}),
        json.dumps({"body": ""}),
        json.dumps({"attributes": {"n": 1}}),
        json.dumps(["a list"]),
        json.dumps({"body": "late", "delay": 900}),
        *good[5:],
    ]
    result = run("send", "jobs", "--file", str(_write(tmp_path / "m.jsonl", lines)), "--json", code=1)
    report = json.loads(result.stdout)
    assert report["sent"] == 25 and report["lines"] == 29
    assert [(f["line"], f["code"]) for f in report["failed"]] == [
        (7, "InvalidParameterValue"),
        (9, "InvalidParameterValue"),
        (10, "MissingParameter"),
        (11, "InvalidParameterValue"),
    ]
    assert "not JSON" in report["failed"][0]["message"]
    assert result.stderr.splitlines()[-1] == "error: EntriesFailed: 4 of 29 lines failed"
    assert "line 9: InvalidParameterValue: message body must not be empty" in result.stderr
    stats = jobs.stats()
    assert (stats.approximate_number_of_messages, stats.approximate_number_of_messages_delayed) == (24, 1)
    (attributed,) = [m for m in jobs.peek(limit=100) if m.body == "with attributes"]
    assert attributed.attributes == {
        "n": Attribute("Number", "5"),
        "s": Attribute("String", "x"),
        "b": Attribute("Binary", b"hi"),
    }


def test_text_report(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    broker.create_queue("jobs")
    path = _write(tmp_path / "ok.jsonl", ['"a"', '"b"'])
    result = run("send", "jobs", "--file", str(path))
    assert result.stdout == f"sent 2 of 2 messages from {path}\n"
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_options_are_defaults_that_lines_override(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    orders = broker.create_queue("orders.fifo", fifo=True, content_based_deduplication=True)
    lines = [
        '"created 17"',
        json.dumps({"body": "created 18", "group": "o18", "attributes": {"kind": "b"}}),
        json.dumps({"body": "paid 17", "dedup_id": "p17"}),
    ]
    path = _write(tmp_path / "orders.jsonl", lines)
    defaults = ("--group", "o17", "--attr", "kind=a", "--attr", "v:Number=1")
    run("send", "orders.fifo", "--file", str(path), *defaults)
    messages = {m.body: m for m in orders.peek()}
    assert [m.group_id for m in messages.values()] == ["o17", "o18", "o17"]
    assert messages["paid 17"].deduplication_id == "p17"
    assert messages["created 18"].attributes == {
        "kind": Attribute("String", "b"),
        "v": Attribute("Number", "1"),
    }
    assert messages["created 17"].attributes["kind"] == Attribute("String", "a")


def test_reads_stdin_with_a_dash(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    report = json.loads(run("send", "jobs", "--file", "-", "--json", input='"a"\n"b"\n"c"\n').stdout)
    assert report == {"sent": 3, "lines": 3, "failed": []}
    assert [m.body for m in jobs.peek()] == ["a", "b", "c"]


def test_a_batch_too_large_as_a_whole_goes_message_by_message(
    run: Run, broker: durableq.Broker, tmp_path: Path
) -> None:
    jobs = broker.create_queue("jobs", maximum_message_size=1_048_576)
    big = "x" * 300_000  # four of these exceed the 1 MiB of one batch
    path = _write(tmp_path / "big.jsonl", [json.dumps(big)] * 5)
    assert json.loads(run("send", "jobs", "--file", str(path), "--json").stdout)["sent"] == 5
    assert jobs.stats().approximate_number_of_messages == 5


def test_a_missing_queue_stops_before_sending(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    path = _write(tmp_path / "m.jsonl", ['"a"'])
    result = run("send", "nope", "--file", str(path), code=1)
    assert result.stderr == "error: QueueDoesNotExist: queue 'nope' does not exist\n"
    run("send", "nope", "--file", str(tmp_path / "absent.jsonl"), code=2)


@pytest.mark.parametrize("as_json", [False, True])
def test_the_progress_bar_shows_on_a_terminal_only_without_json(
    run: Run, broker: durableq.Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    from durableq.cli import output

    broker.create_queue("jobs")
    monkeypatch.setattr(output, "interactive", lambda: True)
    path = _write(tmp_path / "m.jsonl", ['"a"'] * 12)
    result = run("send", "jobs", "--file", str(path), *(["--json"] if as_json else []))
    # click draws the bar only on a real terminal; on the test's stream it writes its label
    assert ("sending to jobs" in result.stderr) is not as_json
