"""What the endpoint logs: one access-log line per request whatever a client puts in it (README, "Logs
and health")."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from urllib.parse import quote

import pytest

from durableq.server import serve

from .conftest import ServerProcess
from .test_malformed import FORM, JSON, post

#: What a client could try to pass off as a line of the access log of its own.
FORGED = "2099-01-01 00:00:00,000 INFO durableq.server.access: 127.0.0.1:1 POST DeleteQueue jobs 200 1.0ms -"
#: Requests whose action or queue URL carries line breaks and other control characters.
FORGERS: list[tuple[bytes, dict[str, str]]] = [
    (f"Action=SendMessage%0A{quote(FORGED)}".encode(), {"Content-Type": FORM}),
    (f"Action=GetQueueAttributes&QueueUrl=jobs%0D%0A{quote(FORGED)}".encode(), {"Content-Type": FORM}),
    (f"Action=PurgeQueue&QueueUrl=http://x/0/q%1B[2J%0A{quote(FORGED)}".encode(), {"Content-Type": FORM}),
    (
        json.dumps({"QueueUrl": f"jobs\u2028\n{FORGED}"}).encode(),
        {"Content-Type": JSON, "X-Amz-Target": "AmazonSQS.GetQueueAttributes"},
    ),
]


def _forge(url: str) -> None:
    for body, headers in FORGERS:
        status, _, _ = post(url, body, headers)
        assert 400 <= status < 500


def test_a_line_break_in_an_action_or_a_queue_url_cannot_forge_a_log_line(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="durableq.server.access")
    with serve(target, port=0) as server:
        _forge(server.url)
    lines = [r.getMessage() for r in caplog.records if r.name == "durableq.server.access"]
    assert len(lines) == len(FORGERS)
    assert all(text.isprintable() for text in lines), lines
    assert all("\\n2099-01-01" in lines[i] for i in (0, 1, 3)), lines
    assert "q\\x1b[2J" in lines[2]  # (urlsplit drops a URL's line breaks, as the WHATWG URL standard does)
    first = next(r for r in caplog.records if r.name == "durableq.server.access")
    assert first.access["action"] == f"SendMessage\n{FORGED}"[:64]  # type: ignore[attr-defined]


def test_the_text_log_has_one_line_per_request(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--log-level", "info") as running:
        _forge(running.url)
        stderr = running.stop()
    lines = stderr.splitlines()
    assert len([line for line in lines if "durableq.server.access" in line]) == len(FORGERS)
    assert not any(line.startswith("2099") for line in lines)
    assert all(line.isprintable() for line in lines)


def test_the_json_log_keeps_the_exact_values_in_its_fields(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--log-level", "info", "--log-format", "json") as running:
        _forge(running.url)
        stderr = running.stop()
    records = [json.loads(line) for line in stderr.splitlines()]
    access = [r for r in records if r["logger"] == "durableq.server.access"]
    assert len(access) == len(FORGERS)
    assert access[0]["action"] == f"SendMessage\n{FORGED}"[:64]
    assert all(r["message"].isprintable() for r in access)
