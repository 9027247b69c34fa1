"""``durableq schedule ...``, ``durableq scheduler`` and ``durableq worker --schedules``: each command's
effect, checked through the library; the scheduler as a real process, stopped by SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import durableq
from tests.cli.conftest import Run
from tests.cli.test_executable import _executable
from tests.conftest import until
from tests.worker_handlers import events


def test_create_list_show_update_pause_resume_delete(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    result = run(
        "schedule", "create", "nightly", "jobs", "cron(0 2 * * ? *)", '{"task": "report"}',
        "--timezone", "Europe/Paris", "--attr", "kind=report", "--catch-up", "all",
    )  # fmt: skip
    assert result.stdout.startswith("schedule nightly: next tick ")
    made = broker.get_schedule("nightly")
    assert (made.expression, made.timezone, made.catch_up) == ("cron(0 2 * * ? *)", "Europe/Paris", "all")
    assert made.attributes == {"kind": durableq.Attribute("String", "report")}
    listed = run("schedule", "list").stdout
    assert listed.splitlines()[0].split() == ["name", "expression", "queue", "next", "tick"]
    assert "nightly  cron(0 2 * * ? *)  jobs" in listed
    shown = json.loads(run("schedule", "show", "nightly", "--json").stdout)
    assert shown["body"] == '{"task": "report"}' and shown["enabled"] is True
    run("schedule", "update", "nightly", "--expression", "rate(6 hours)", "--flexible-window", "60")
    changed = broker.get_schedule("nightly")
    assert (changed.expression, changed.flexible_window) == ("rate(6 hours)", 60)
    assert run("schedule", "pause", "nightly").stdout == "schedule nightly paused: next tick none (paused)\n"
    assert broker.get_schedule("nightly").enabled is False
    assert "resumed" in run("schedule", "resume", "nightly").stdout
    assert broker.get_schedule("nightly").enabled is True
    assert run("schedule", "delete", "nightly").stdout == "deleted schedule nightly\n"
    assert broker.list_schedules() == []
    assert run("schedule", "list").stdout == "no schedules\n"
    actions = [event.action for event in broker.audit() if "Schedule" in event.action]
    assert actions == [
        "CreateSchedule",
        "UpdateSchedule",
        "UpdateSchedule",
        "UpdateSchedule",
        "DeleteSchedule",
    ]


def test_errors_are_one_line_in_the_options_words(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    result = run("schedule", "create", "s", "jobs", "cron(0 12 * * * *)", "x", code=1)
    assert result.output.count("\n") == 1
    assert (
        "InvalidParameterValue: expression 'cron(0 12 * * * *)' is not a schedule expression" in result.output
    )
    result = run("schedule", "create", "s", "jobs", "rate(1 minute)", "x", "--flexible-window", "-5", code=1)
    assert "--flexible-window must be from 0 to 86400 seconds" in result.output
    result = run("schedule", "show", "nope", code=1)
    assert "ResourceNotFoundException: there is no schedule named 'nope'" in result.output


def test_the_scheduler_sends_logs_and_stops_cleanly_on_sigterm(
    location: str, broker: durableq.Broker
) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("hourly", "jobs", "rate(1 hour)", "tick")  # its first tick is at once
    process = subprocess.Popen(
        [_executable(), "--db", location, "scheduler"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        until(lambda: jobs.stats().approximate_number_of_messages == 1, "the scheduler sent the tick")
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "schedule hourly: sent tick " in stderr
    assert "SIGTERM received: scheduler stopped (1 ticks sent)" in stderr


def test_a_worker_with_schedules_fires_them(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    broker.create_queue("jobs")
    body = json.dumps({"id": "scheduled", "log": str(log)})
    broker.create_schedule("once", "jobs", "rate(1 day)", body)  # its first tick is at once
    run("worker", "jobs", "tests.worker_handlers:record", "--schedules", "--idle-timeout", "2", "--wait", "1")
    assert [job for event, job, _, _ in events(str(log)) if event == "end"] == ["scheduled"]
    assert broker.get_schedule("once").last_fire is not None
