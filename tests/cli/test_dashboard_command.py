"""``durableq dashboard`` as a process: prints its address with the token, serves until SIGTERM or
Ctrl-C and exits 0; a database that does not exist is one error line, and is not created."""

from __future__ import annotations

import http.client
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import durableq
from tests.cli.test_executable import _executable

from .conftest import Run


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_the_dashboard_serves_until_stopped(db: Path, stop: signal.Signals) -> None:
    with durableq.open(db) as broker:
        broker.create_queue("jobs").send("x")
    process = subprocess.Popen(
        [_executable(), "--db", str(db), "dashboard", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(f"durableq: dashboard of {db} at http://127.0.0.1:"), line
        url = urlsplit(line.split(" at ", 1)[1].strip())
        assert url.query.startswith("token=") and len(url.query) > len("token=") + 30
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
        conn.request("GET", "/fragments/queues", headers={"Authorization": f"Bearer {url.query[6:]}"})
        answer = conn.getresponse()
        assert answer.status == 200 and 'data-queue="jobs"' in answer.read().decode()
        conn.close()
        process.send_signal(stop)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "Traceback" not in err
    finally:
        process.kill()
        process.wait()


@pytest.mark.sqlite_only("a file that does not exist")
def test_a_missing_database_is_one_error_line(run: Run, db: Path) -> None:
    result = run("dashboard", "--port", "0", code=1)
    assert result.stderr.startswith("error: NotADurableQDatabase: no durableq database at")
    assert result.stderr.count("\n") == 1
    assert not db.exists()


def test_a_short_token_is_refused(run: Run, broker: durableq.Broker) -> None:
    result = run("dashboard", "--port", "0", "--token", "1234", code=1)
    assert result.stderr.startswith(
        "error: InvalidParameterValue: the dashboard's token must be at least 16 printable ASCII"
    )
