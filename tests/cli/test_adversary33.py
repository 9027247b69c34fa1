"""Adversary 33, the CLI: `durableq schedule` errors (one line, the code first, in the user's words)."""

from __future__ import annotations

import durableq
from tests.cli.conftest import Run


def test_start_and_end_errors_say_the_time_as_the_user_wrote_it(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    args = ("schedule", "create", "s", "jobs", "rate(1 minute)", "x")
    late = run(*args, "--start", "2030-01-01", "--end", "2029-01-01", code=1).output
    far = run(*args, "--start", "9999-01-01", code=1).output
    for output in (late, far):
        assert output.startswith("error: InvalidParameterValue: ") and output.count("\n") == 1
        assert "datetime.datetime(" not in output
    assert "2029-01-01T00:00:00Z" in late and "2030-01-01T00:00:00Z" in late
    assert "9999-01-01T00:00:00" in far
