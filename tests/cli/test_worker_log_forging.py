"""``durableq worker`` logs one line per record (README): a handler's error text, which often quotes
what a message carried, must not start lines of its own in the text log."""

from __future__ import annotations

import json
from pathlib import Path

import durableq
from tests.cli.conftest import Run

FORGED = "2026-01-01T00:00:00.000+00:00 INFO MainProcess job 00000000 done in 0.001 s"


def test_a_handlers_error_text_cannot_forge_a_log_line(
    run: Run, broker: durableq.Broker, tmp_path: Path
) -> None:
    queue = broker.create_queue("jobs")
    queue.send(json.dumps({"id": f"j0\n{FORGED}", "log": str(tmp_path / "jobs.log"), "fail": True}))
    result = run("worker", "jobs", "tests.worker_handlers:record", "--idle-timeout", "1", "--wait", "1")
    assert "fails on purpose" in result.stderr
    assert not any(line.startswith(FORGED) for line in result.stderr.splitlines()), result.stderr
