"""``durableq worker``: runs a handler (module:function) with the library's Worker."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import durableq
from tests.cli.conftest import Run
from tests.cli.test_executable import _executable
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


def test_log_times_are_iso_8601_in_utc(run: Run, broker: durableq.Broker, tmp_path: Path) -> None:
    queue = broker.create_queue("jobs")
    queue.send(json.dumps({"id": "j0", "log": str(tmp_path / "jobs.log")}))
    before = datetime.now(UTC)
    as_json = run(
        "worker", "jobs", "tests.worker_handlers:record", "--idle-timeout", "1", "--wait", "1", "--json"
    )
    after = datetime.now(UTC)
    times = [json.loads(line)["time"] for line in as_json.stderr.splitlines()]
    assert times
    for text in times:
        # Once "2026-11-22 13:37:30,123" in local time, as the logging module writes by default.
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", text), text
        assert before - timedelta(seconds=1) <= datetime.fromisoformat(text) <= after
    queue.send(json.dumps({"id": "j1", "log": str(tmp_path / "jobs.log")}))
    as_text = run("worker", "jobs", "tests.worker_handlers:record", "--idle-timeout", "1", "--wait", "1")
    for line in as_text.stderr.splitlines():
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 (INFO|WARNING|ERROR) ", line), line


def test_a_job_that_goes_to_the_dead_letter_queue_is_logged(
    run: Run, broker: durableq.Broker, tmp_path: Path
) -> None:
    dead = broker.create_queue("jobs-dlq")
    queue = broker.create_queue("jobs", redrive_policy=durableq.RedrivePolicy("jobs-dlq", 2))
    sent = queue.send(json.dumps({"id": "bad", "log": str(tmp_path / "jobs.log"), "fail": True}))
    result = run(
        "worker", "jobs", "tests.worker_handlers:record", "--idle-timeout", "4", "--wait", "1", "--json"
    )
    jobs = [json.loads(line)["job"] for line in result.stderr.splitlines() if '"job"' in line]
    assert [(j["outcome"], j["receive_count"]) for j in jobs] == [("failed", 1), ("dead-lettered", 2)]
    assert jobs[1]["dead_letter_queue"] == "jobs-dlq" and jobs[1]["message_id"] == sent.message_id
    assert jobs[1]["error"] == "RuntimeError: job bad fails on purpose"
    [line] = [json.loads(line) for line in result.stderr.splitlines() if "dead-lettered" in line]
    assert line["level"] == "ERROR"
    assert line["message"].endswith(
        "on its last allowed receive (2 of 2): RuntimeError: job bad fails on "
        "purpose; it moves to dead-letter queue jobs-dlq"
    )
    # Released at once, not after a back-off: the worker's next receive moved it.
    [moved] = dead.receive()
    assert moved.message_id == sent.message_id and moved.dead_letter_source == "jobs"


def test_a_stop_on_a_signal_is_logged(location: str, broker: durableq.Broker, tmp_path: Path) -> None:
    log, gate = tmp_path / "jobs.log", tmp_path / "gate"
    queue = broker.create_queue("jobs")
    queue.send(json.dumps({"id": "held", "log": str(log), "until": str(gate)}))
    worker = subprocess.Popen(
        [_executable(), "--db", location, "worker", "jobs", "tests.worker_handlers:record", "--wait", "1"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        _until(lambda: bool(events(str(log))))  # the job runs, held until the gate file exists
        worker.send_signal(signal.SIGTERM)
        assert worker.stderr is not None
        stop = worker.stderr.readline()  # the first line: nothing else happened yet
        assert stop.endswith(
            " INFO MainProcess SIGTERM received: stopping (running jobs: 1, grace period: 30 s)\n"
        )
        gate.touch()
        rest = worker.stderr.read()
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert " job " in rest and " done in " in rest  # it finished within the grace period
    assert queue.stats().approximate_number_of_messages_not_visible == 0
    assert queue.stats().approximate_number_of_messages == 0


def test_worker_processes_log_their_jobs_too(location: str, broker: durableq.Broker, tmp_path: Path) -> None:
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
            location,
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


def _until(condition: Callable[[], bool], timeout: float = 60) -> None:
    """Poll until ``condition`` holds; fail loudly at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_worker_processes_handle_an_encrypted_queue(location: str, tmp_path: Path) -> None:
    """The worker processes open the database with the command's keyring and payload store."""
    import subprocess
    import sys

    log, keys, store = tmp_path / "jobs.log", tmp_path / "keys.json", tmp_path / "store"
    durableq.Keyring(keys).create("orders")
    with durableq.open(location, keyring=keys, payload_dir=store, durability="normal") as broker:
        queue = broker.create_queue(
            "jobs", kms_master_key_id="alias/orders", large_payloads=True, maximum_message_size=1024
        )
        for i in range(4):  # each over the 1 KiB maximum: its body goes to the payload store, sealed
            queue.send(json.dumps({"id": f"j{i}", "log": str(log), "padding": "x" * 2_000}))
        result = subprocess.run(
            [
                str(Path(sys.executable).with_name("durableq")),
                "--db",
                location,
                "--keyring",
                str(keys),
                "--payload-dir",
                str(store),
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
        assert result.stderr.count(" done in ") == 4, result.stderr
        assert queue.stats().approximate_number_of_messages == 0
    assert sorted(job for event, job, _, _ in events(str(log)) if event == "end") == [
        f"j{i}" for i in range(4)
    ]
