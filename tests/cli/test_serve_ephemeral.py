"""`durableq serve --ephemeral`: a temporary database, removed when the endpoint stops (a real process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from durableq.cli import main

from tests.cli.test_executable import _executable
from tests.server.conftest import client


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_temporary_database_is_removed_when_the_endpoint_stops(
    tmp_path: Path, stop: signal.Signals
) -> None:
    env = {key: value for key, value in os.environ.items() if key != "DURABLEQ_DB"}
    serving = subprocess.Popen(
        [_executable(), "serve", "--ephemeral", "--port", "0", "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serving.stdout is not None
        ready = json.loads(serving.stdout.readline())
        db = Path(ready["db"])
        sqs = client(ready["url"])
        url = sqs.create_queue(QueueName="scratch")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="gone with the endpoint")
        assert db.is_file() and db.parent != tmp_path and (db.parent.stat().st_mode & 0o777) == 0o700
        serving.send_signal(stop)
        assert serving.wait(timeout=60) == 0
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()
    assert not db.parent.exists()  # the file, its WAL, its lock and payload store with it
    assert list(tmp_path.iterdir()) == []  # and no durableq.db where it ran


def test_ephemeral_with_a_database_is_refused(tmp_path: Path) -> None:
    refused = CliRunner().invoke(main, ["--db", str(tmp_path / "q.db"), "serve", "--ephemeral"])
    assert refused.exit_code == 1
    assert "--ephemeral serves a new temporary database; give it or --db (or DURABLEQ_DB), not both" in (
        refused.stderr
    )
    assert not (tmp_path / "q.db").exists()
