"""``durableq worker``: runs a handler (module:function) with the library's Worker."""

from __future__ import annotations

import json
from pathlib import Path

import durableq
from tests.cli.conftest import Run
from tests.worker_handlers import events


def test_the_worker_runs_the_handler_until_idle(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    queue = broker.create_queue("jobs")
    for i in range(5):
        queue.send(json.dumps({"id": f"j{i}", "log": str(log)}))
    run(
        "worker",
        "jobs",
        "tests.worker_handlers:record",
        "--concurrency",
        "2",
        "--idle-timeout",
        "1",
        "--wait",
        "1",
    )
    assert sorted(job for event, job, _, _ in events(str(log)) if event == "end") == [
        f"j{i}" for i in range(5)
    ]
    assert queue.stats().approximate_number_of_messages == 0


def test_a_handler_that_is_not_module_function_is_a_usage_error(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    result = run("worker", "jobs", "no_colon_here", code=2)
    assert "module:function" in result.output


def test_a_handler_that_cannot_be_imported_is_refused_in_one_line(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    result = run("worker", "jobs", "no_such_module:handler", code=1)
    assert result.output.count("\n") == 1 and "cannot load handler" in result.output
    result = run("worker", "jobs", "tests.worker_handlers:missing", code=1)
    assert "AttributeError" in result.output


def test_bad_worker_options_are_refused(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    result = run("worker", "jobs", "tests.worker_handlers:record", "--concurrency", "0", code=1)
    assert "InvalidParameterValue: --concurrency must be" in result.output


def test_json_log_lines_carry_each_jobs_outcome(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    log = tmp_path / "jobs.log"
    queue = broker.create_queue("jobs")
    sent = queue.send(json.dumps({"id": "j0", "log": str(log)}))
    result = run(
        "worker", "jobs", "tests.worker_handlers:record", "--idle-timeout", "1", "--wait", "1", "--json"
    )
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    [done] = [line["job"] for line in lines if "job" in line]
    assert done["message_id"] == sent.message_id and done["outcome"] == "done" and done["receive_count"] == 1


def test_worker_processes_log_their_jobs_too(db: Path, broker: durableq.Broker, tmp_path: Path) -> None:
    import subprocess
    import sys

    log = tmp_path / "jobs.log"
    queue = broker.create_queue("jobs")
    for i in range(4):
        queue.send(json.dumps({"id": f"j{i}", "log": str(log)}))
    durableq_command = Path(sys.executable).with_name("durableq")
    result = subprocess.run(
        [
            str(durableq_command),
            "--db",
            str(db),
            "worker",
            "jobs",
            "tests.worker_handlers:record",
            "--processes",
            "--concurrency",
            "2",
            "--idle-timeout",
            "2",
            "--wait",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(" done in ") == 4
    assert "durableq-worker-" in result.stderr  # the lines come from the worker processes
