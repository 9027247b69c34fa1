"""The installed `durableq` executable, run as a real process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import durableq


def _executable() -> str:
    beside_python = Path(sys.executable).parent / "durableq"
    found = str(beside_python) if beside_python.exists() else shutil.which("durableq")
    assert found, "the durableq console script is not installed"
    return found


def _durableq(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DURABLEQ_DB": str(db)}  # the real process reads the database from the environment
    return subprocess.run(
        [_executable(), *args], input=stdin, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_session_through_the_executable(db: Path) -> None:
    assert _durableq(db, "init").returncode == 0
    assert _durableq(db, "queue", "create", "jobs").returncode == 0
    sent = _durableq(db, "send", "jobs", "-", "--attr", "n:Number=1", "--json", stdin="hello")
    assert sent.returncode == 0, sent.stderr
    message_id = json.loads(sent.stdout)["message_id"]
    with durableq.open(db) as broker:
        (peeked,) = broker.get_queue("jobs").peek()
    assert (peeked.message_id, peeked.body) == (message_id, "hello")
    received = _durableq(db, "receive", "jobs", "--delete", "--json")
    assert received.returncode == 0, received.stderr
    assert [m["message_id"] for m in json.loads(received.stdout)] == [message_id]
    with durableq.open(db) as broker:
        assert broker.get_queue("jobs").peek() == []


def test_errors_and_usage_through_the_executable(db: Path) -> None:
    missing = _durableq(db, "queue", "list")
    assert missing.returncode == 1
    assert (
        missing.stderr
        == f"error: NotADurableQDatabase: no durableq database at {db}: create one with durableq init\n"
    )
    _durableq(db, "init")
    refused = _durableq(db, "receive", "nope")
    assert refused.returncode == 1
    assert refused.stderr == "error: QueueDoesNotExist: queue 'nope' does not exist\n"
    usage = _durableq(db, "receive")
    assert usage.returncode == 2 and "Usage: durableq receive" in usage.stderr
    for result in (missing, refused, usage):
        assert "Traceback" not in result.stdout + result.stderr
    assert _durableq(db, "--version").stdout.strip() == f"durableq, version {durableq.__version__}"


def test_python_dash_m_durableq_is_the_cli(db: Path) -> None:
    env = {**os.environ, "DURABLEQ_DB": str(db)}

    def module(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "durableq", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    version = module("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"durableq, version {durableq.__version__}"
    assert module("init").returncode == 0
    assert module("queue", "create", "jobs").returncode == 0
    with durableq.open(db) as broker:
        assert broker.get_queue("jobs").name == "jobs"
    usage = module("receive")
    assert (
        usage.returncode == 2 and "Usage: durableq receive" in usage.stderr
    )  # the program's name, not __main__


def test_importing_durableq_leaves_the_command_line_out() -> None:
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, durableq; print(sorted({'click', 'durableq.cli'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert imported.stdout.strip() == "[]"
