"""durableq.testing: the context manager and the pytest fixtures, used the way a project uses them."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from durableq.testing import SQSEndpoint, sqs_endpoint

from .test_real_clients import CLIENTS, SCENARIO, check, node_clients  # noqa: F401 (a fixture)


def _refuses_connections(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sqs_endpoint_serves_a_temporary_file_removed_at_the_end() -> None:
    with sqs_endpoint() as endpoint:
        assert endpoint.url.startswith("http://127.0.0.1:")
        sqs = endpoint.client()
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        [message] = sqs.receive_message(QueueUrl=url)["Messages"]
        assert message["Body"] == "hello"
        with pytest.raises(ClientError, match="MessageRetentionPeriod"):  # as strict as SQS, unlike moto
            sqs.create_queue(QueueName="short", Attributes={"MessageRetentionPeriod": "1"})
        db = Path(endpoint.db)
        assert db.is_file() and (db.parent.stat().st_mode & 0o777) == 0o700
    assert not db.parent.exists()
    assert _refuses_connections(endpoint.url)


def test_two_endpoints_are_apart_and_a_given_file_stays(tmp_path: Path) -> None:
    with sqs_endpoint() as one, sqs_endpoint(tmp_path / "kept.db", region="eu-west-1") as other:
        assert one.url != other.url and other.region == "eu-west-1"
        one.client().create_queue(QueueName="only-in-one")
        assert "QueueUrls" not in other.client().list_queues()
        other.client().create_queue(QueueName="kept")
    with sqs_endpoint(tmp_path / "kept.db") as again:
        assert [u.rsplit("/", 1)[-1] for u in again.client().list_queues()["QueueUrls"]] == ["kept"]


def test_the_environment_points_a_child_process_at_the_endpoint() -> None:
    code = "import boto3; print(boto3.client('sqs').create_queue(QueueName='from-child')['QueueUrl'])"
    with sqs_endpoint() as endpoint:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={"PATH": "/usr/bin:/bin", **endpoint.environment()},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().endswith("/from-child")
        assert endpoint.client().list_queues()["QueueUrls"] == [done.stdout.strip()]


# A project's test module: only the fixtures and boto3, nothing of durableq imported.
PROJECT_TESTS = """
def test_first(durableq_sqs):
    url = durableq_sqs.create_queue(QueueName="jobs")["QueueUrl"]
    durableq_sqs.send_message(QueueUrl=url, MessageBody="job 1")
    assert durableq_sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "job 1"


def test_second(durableq_sqs, durableq_endpoint):
    assert durableq_sqs.meta.endpoint_url == durableq_endpoint.url
    print("QUEUES", sorted(durableq_sqs.list_queues().get("QueueUrls", [])))
"""


def _run_project(folder: Path, ini: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_project.py").write_text(PROJECT_TESTS)
    (folder / "pytest.ini").write_text(textwrap.dedent(ini))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_project.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_project_uses_the_fixtures_with_one_endpoint_per_session(tmp_path: Path) -> None:
    # One endpoint per test, the default, is what docs/guides/testing.md's example runs (its second
    # test sees no queue of the first); here the option of a suite that wants one for all its tests.
    done = _run_project(tmp_path, "[pytest]\ndurableq_endpoint_scope = session\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    [line] = [line for line in done.stdout.splitlines() if "QUEUES" in line]
    urls = json.loads(line.split("QUEUES", 1)[1].strip().replace("'", '"'))
    assert [url.rsplit("/", 1)[-1] for url in urls] == ["jobs"]  # the first test's queue


def test_a_scope_the_plugin_does_not_know_is_refused(tmp_path: Path) -> None:
    done = _run_project(tmp_path, "[pytest]\ndurableq_endpoint_scope = forever\n")
    assert done.returncode != 0
    assert "durableq_endpoint_scope must be one of function, module, session; got 'forever'" in (
        done.stdout + done.stderr
    )


@pytest.mark.slow
def test_the_javascript_sdk_through_the_fixture(durableq_endpoint: SQSEndpoint, node_clients: Path) -> None:  # noqa: F811
    done = subprocess.run(
        [
            "node",
            str(CLIENTS / "run_node.mjs"),
            str(node_clients),
            "sqs-json",
            durableq_endpoint.url,
            str(SCENARIO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header, *outcomes = (json.loads(line) for line in done.stdout.splitlines())
    assert header == {"protocol": "json"}
    steps: list[dict[str, Any]] = json.loads(SCENARIO.read_text(encoding="utf-8"))["steps"]
    check(steps, outcomes, durableq_endpoint.url, "json")
