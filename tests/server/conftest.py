"""The endpoint as a real process on a free port, and boto3 clients pointed at it."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from .. import pgcluster
from ..conftest import ENGINES

REGION = "us-east-1"
ACCOUNT = "000000000000"
KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
_names = itertools.count()


class ServerProcess:
    """``python -m durableq.server`` on port 0; the URL is the one it prints."""

    def __init__(self, db: Path | str, *args: str, command: list[str] | None = None) -> None:
        argv = command or [sys.executable, "-m", "durableq.server", "--db", str(db)]
        self.db = db
        self.process = subprocess.Popen(
            [*argv, "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        # stderr is read all along: a server whose log fills the pipe would block writing it.
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=self._stderr.extend, args=(self.process.stderr,), daemon=True)
        self._reader.start()
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if " at http" not in line:
            self.process.wait(30)
            self._reader.join(30)
            raise AssertionError(f"the server did not start: {line!r} {''.join(self._stderr)}")
        self.url = line.rsplit(" ", 1)[-1].strip()

    def stop(self) -> str:
        """Stop it as Ctrl-C would; returns what it wrote on stderr."""
        self.process.terminate()
        self.process.wait(30)
        self._reader.join(30)
        stderr = "".join(self._stderr)
        assert self.process.returncode == 0, stderr
        return stderr

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.stop()


def client(
    url: str, key_id: str = "test", secret: str = "test", verify: str | None = None, **config: Any
) -> Any:
    """A boto3 SQS client for the endpoint, as an application would make one (``verify``: a CA file)."""
    return boto3.client(
        "sqs",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        verify=verify,
        config=Config(**config) if config else None,
    )


@pytest.fixture(scope="module", params=ENGINES)
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    """The endpoint of a module's tests: once on a SQLite file, once on a PostgreSQL database."""
    if request.param == "sqlite":
        with ServerProcess(tmp_path_factory.mktemp("server") / "queues.db") as running:
            yield running
        return
    cluster: pgcluster.Cluster = request.getfixturevalue("pg_cluster")
    name = pgcluster.create_database(cluster, template=request.getfixturevalue("pg_template"))
    try:
        with ServerProcess(cluster.url(name)) as running:
            yield running
    finally:
        pgcluster.drop_database(cluster, name)


@pytest.fixture(scope="module")
def sqs(server: ServerProcess) -> Any:
    return client(server.url)


@pytest.fixture
def name() -> str:
    """A queue name no other test of the module uses."""
    return f"q{next(_names)}"


@pytest.fixture
def queue_url(sqs: Any, name: str) -> str:
    return sqs.create_queue(QueueName=name)["QueueUrl"]  # type: ignore[no-any-return]


@pytest.fixture
def fifo_url(sqs: Any, name: str) -> str:
    return sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]  # type: ignore[no-any-return]


def error_of(excinfo: pytest.ExceptionInfo[Any]) -> tuple[str, str, int]:
    """(legacy code, shape, HTTP status) of a botocore ClientError."""
    response = excinfo.value.response
    return (
        response["Error"]["Code"],
        response["Error"].get("QueryErrorCode"),
        response["ResponseMetadata"]["HTTPStatusCode"],
    )
