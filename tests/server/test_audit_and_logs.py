"""What the endpoint records: one access-log line per request whatever a client puts in it, and one
audit row per management call, refused ones included (README, "Audit trail" and "Logs and health")."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from durableq.cli import main

import durableq
from durableq.server import serve
from durableq.server.actions import MANAGEMENT

from .conftest import ACCOUNT, REGION, ServerProcess, client
from .test_malformed import FORM, JSON, call_json, call_query, post

#: What a client could try to pass off as a line of the access log of its own.
FORGED = "2099-01-01 00:00:00,000 INFO durableq.server.access: 127.0.0.1:1 POST DeleteQueue jobs 200 1.0ms -"
#: Requests whose action or queue URL carries line breaks and other control characters.
FORGERS: list[tuple[bytes, dict[str, str]]] = [
    (f"Action=SendMessage%0A{quote(FORGED)}".encode(), {"Content-Type": FORM}),
    (f"Action=GetQueueAttributes&QueueUrl=jobs%0D%0A{quote(FORGED)}".encode(), {"Content-Type": FORM}),
    (f"Action=PurgeQueue&QueueUrl=http://x/0/q%1B[2J%0A{quote(FORGED)}".encode(), {"Content-Type": FORM}),
    (
        json.dumps({"QueueUrl": f"jobs\u2028\n{FORGED}"}).encode(),
        {"Content-Type": JSON, "X-Amz-Target": "AmazonSQS.GetQueueAttributes"},
    ),
]


def _forge(url: str) -> None:
    for body, headers in FORGERS:
        status, _, _ = post(url, body, headers)
        assert 400 <= status < 500


def test_a_line_break_in_an_action_or_a_queue_url_cannot_forge_a_log_line(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="durableq.server.access")
    with serve(target, port=0) as server:
        _forge(server.url)
    lines = [r.getMessage() for r in caplog.records if r.name == "durableq.server.access"]
    assert len(lines) == len(FORGERS)
    assert all(text.isprintable() for text in lines), lines
    assert all("\\n2099-01-01" in lines[i] for i in (0, 1, 3)), lines
    assert "q\\x1b[2J" in lines[2]  # (urlsplit drops a URL's line breaks, as the WHATWG URL standard does)
    first = next(r for r in caplog.records if r.name == "durableq.server.access")
    assert first.access["action"] == f"SendMessage\n{FORGED}"[:64]  # type: ignore[attr-defined]


def test_the_text_log_has_one_line_per_request(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--log-level", "info") as running:
        _forge(running.url)
        stderr = running.stop()
    lines = stderr.splitlines()
    assert len([line for line in lines if "durableq.server.access" in line]) == len(FORGERS)
    assert not any(line.startswith("2099") for line in lines)
    assert all(line.isprintable() for line in lines)


def test_the_json_log_keeps_the_exact_values_in_its_fields(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--log-level", "info", "--log-format", "json") as running:
        _forge(running.url)
        stderr = running.stop()
    records = [json.loads(line) for line in stderr.splitlines()]
    access = [r for r in records if r["logger"] == "durableq.server.access"]
    assert len(access) == len(FORGERS)
    assert access[0]["action"] == f"SendMessage\n{FORGED}"[:64]
    assert all(r["message"].isprintable() for r in access)


# -- the audit trail -------------------------------------------------------------------------


def arn(name: str, region: str = REGION) -> str:
    return quote(f"arn:aws:sqs:{region}:{ACCOUNT}:{name}", safe="")


#: A refused call of every management action: (query form, the row it leaves).
REFUSED: dict[str, tuple[str, tuple[str, str | None, str]]] = {
    "CreateQueue, bad name": (
        "Action=CreateQueue&QueueName=bad%20name!",
        ("CreateQueue", "bad name!", "InvalidParameterValue"),
    ),
    "CreateQueue, unknown attribute": (
        "Action=CreateQueue&QueueName=fresh&Attribute.1.Name=Bogus&Attribute.1.Value=1",
        ("CreateQueue", "fresh", "InvalidAttributeName"),
    ),
    "CreateQueue, bad attribute value": (
        "Action=CreateQueue&QueueName=fresh&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=-1",
        ("CreateQueue", "fresh", "InvalidAttributeValue"),
    ),
    "CreateQueue, no name": ("Action=CreateQueue", ("CreateQueue", None, "MissingParameter")),
    "DeleteQueue, missing queue": (
        "Action=DeleteQueue&QueueUrl=missing",
        ("DeleteQueue", "missing", "QueueDoesNotExist"),
    ),
    "SetQueueAttributes, missing queue": (
        "Action=SetQueueAttributes&QueueUrl=missing&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=5",
        ("SetQueueAttributes", "missing", "QueueDoesNotExist"),
    ),
    "SetQueueAttributes, read-only attribute": (
        "Action=SetQueueAttributes&QueueUrl=jobs&Attribute.1.Name=QueueArn&Attribute.1.Value=x",
        ("SetQueueAttributes", "jobs", "InvalidAttributeName"),
    ),
    "SetQueueAttributes, bad value": (
        "Action=SetQueueAttributes&QueueUrl=jobs&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=-1",
        ("SetQueueAttributes", "jobs", "InvalidAttributeValue"),
    ),
    "SetQueueAttributes, virtual queue": (
        "Action=SetQueueAttributes&QueueUrl=jobs%23v&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=5",
        ("SetQueueAttributes", "jobs#v", "UnsupportedOperation"),
    ),
    "PurgeQueue, missing queue": (
        "Action=PurgeQueue&QueueUrl=missing",
        ("PurgeQueue", "missing", "QueueDoesNotExist"),
    ),
    "PurgeQueue, malformed URL": (
        "Action=PurgeQueue&QueueUrl=http%3A%2F%2F%5B%3A%3A1%2Fq",
        ("PurgeQueue", "http://[::1/q", "InvalidAddress"),
    ),
    "TagQueue, missing queue": (
        "Action=TagQueue&QueueUrl=missing&Tag.1.Key=k&Tag.1.Value=v",
        ("TagQueue", "missing", "QueueDoesNotExist"),
    ),
    "TagQueue, no tags": ("Action=TagQueue&QueueUrl=jobs", ("TagQueue", "jobs", "MissingParameter")),
    "TagQueue, bad tag": (
        "Action=TagQueue&QueueUrl=jobs&Tag.1.Key=k!&Tag.1.Value=v",
        ("TagQueue", "jobs", "InvalidParameterValue"),
    ),
    "UntagQueue, missing queue": (
        "Action=UntagQueue&QueueUrl=missing&TagKey.1=k",
        ("UntagQueue", "missing", "QueueDoesNotExist"),
    ),
    "UntagQueue, no keys": (
        "Action=UntagQueue&QueueUrl=jobs",
        ("UntagQueue", "jobs", "InvalidParameterValue"),
    ),
    "AddPermission, missing queue": (
        "Action=AddPermission&QueueUrl=missing&Label=l&AWSAccountId.1=123456789012&ActionName.1=SendMessage",
        ("AddPermission", "missing", "QueueDoesNotExist"),
    ),
    "AddPermission, no label": (
        "Action=AddPermission&QueueUrl=jobs&AWSAccountId.1=123456789012&ActionName.1=SendMessage",
        ("AddPermission", "jobs", "MissingParameter"),
    ),
    "RemovePermission, missing queue": (
        "Action=RemovePermission&QueueUrl=missing&Label=l",
        ("RemovePermission", "missing", "QueueDoesNotExist"),
    ),
    "RemovePermission, unknown label": (
        "Action=RemovePermission&QueueUrl=jobs&Label=nope",
        ("RemovePermission", "jobs", "InvalidParameterValue"),
    ),
    "StartMessageMoveTask, not an ARN": (
        "Action=StartMessageMoveTask&SourceArn=nope",
        ("StartMessageMoveTask", "nope", "InvalidParameterValue"),
    ),
    "StartMessageMoveTask, another region": (
        f"Action=StartMessageMoveTask&SourceArn={arn('jobs', 'eu-west-1')}",
        ("StartMessageMoveTask", "jobs", "InvalidParameterValue"),
    ),
    "StartMessageMoveTask, missing queue": (
        f"Action=StartMessageMoveTask&SourceArn={arn('missing')}",
        ("StartMessageMoveTask", "missing", "QueueDoesNotExist"),
    ),
    "CancelMessageMoveTask, unknown task": (
        "Action=CancelMessageMoveTask&TaskHandle=nope",
        ("CancelMessageMoveTask", None, "ResourceNotFoundException"),
    ),
    "CancelMessageMoveTask, no task": (
        "Action=CancelMessageMoveTask",
        ("CancelMessageMoveTask", None, "MissingParameter"),
    ),
}


@pytest.fixture(scope="module")
def reader(server: ServerProcess) -> Iterator[durableq.Broker]:
    """The library on the endpoint's database, with the queue ``jobs`` the refused calls aim at."""
    client(server.url).create_queue(QueueName="jobs")
    with durableq.open(server.db) as opened:
        yield opened


@pytest.mark.parametrize("case", REFUSED)
def test_every_refused_management_call_leaves_one_row(
    server: ServerProcess, reader: durableq.Broker, case: str
) -> None:
    form, row = REFUSED[case]
    last = reader.audit()[-1].event_id
    status, _, body = call_query(server.url, form.encode())
    assert 400 <= status < 500, body
    assert [(e.action, e.queue, e.outcome) for e in reader.audit(after=last)] == [row]


def test_a_request_refused_at_the_door_leaves_no_row(tmp_path: Path) -> None:
    """Unsigned (with credentials), or from a browser: refused before it is a call, as nobody's."""
    with serve(tmp_path / "q.db", port=0, credentials={"AKID": "secret"}) as server:
        unsigned = call_query(server.url, b"Action=DeleteQueue&QueueUrl=missing")
        from_a_page = post(
            server.url, b"Action=PurgeQueue&QueueUrl=missing", {"Content-Type": FORM, "Origin": "http://evil"}
        )
        assert (unsigned[0], from_a_page[0]) == (403, 403)
        with durableq.open(tmp_path / "q.db") as broker:
            assert broker.audit() == []


# -- credentials -----------------------------------------------------------------------------


def test_an_empty_credentials_mapping_is_refused_at_start(tmp_path: Path) -> None:
    """It once served every request unsigned, as if no credentials were given."""
    with pytest.raises(ValueError, match="credentials holds no key pair") as refused:
        serve(tmp_path / "q.db", port=0, credentials={}).shutdown()
    assert "credentials=None to accept unsigned requests" in str(refused.value)
    with pytest.raises(ValueError, match="access key id '' cannot be named"):
        serve(tmp_path / "q.db", port=0, credentials={"": "secret"}).shutdown()
    with pytest.raises(ValueError, match="secret of access key id 'AKID'"):
        serve(tmp_path / "q.db", port=0, credentials={"AKID": ""}).shutdown()


SERVER = [sys.executable, "-m", "durableq.server"]


def test_an_empty_credentials_file_is_refused_at_start(tmp_path: Path) -> None:
    empty = tmp_path / "credentials"
    empty.write_text("# nobody yet\n\n")
    result = subprocess.run(
        [*SERVER, "--db", str(tmp_path / "q.db"), "--port", "0", "--credentials", str(empty)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "holds no credentials" in result.stderr, result.stderr
    refused = CliRunner().invoke(main, ["--db", str(tmp_path / "q.db"), "serve", "--credentials", str(empty)])
    assert refused.exit_code == 1
    assert refused.stderr == f"error: InvalidParameterValue: {empty} holds no credentials\n"


HOSTILE = {
    "NUL": "a\x00b",
    "lone surrogate": "a\ud800b",
    "line break": "a\nb",
    "10,000 characters": "a" * 10_000,
}


@pytest.mark.parametrize("action", MANAGEMENT)
@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_in_a_management_call_is_a_4xx_and_one_row(
    server: ServerProcess, reader: durableq.Broker, action: str, value: str
) -> None:
    members = {"QueueName": value, "QueueUrl": value, "SourceArn": value, "TaskHandle": value, "Label": value}
    last = reader.audit()[-1].event_id
    status, _, body = call_json(server.url, action, members)
    assert 400 <= status < 500, body
    [row] = reader.audit(after=last)
    assert (row.action, row.outcome != "OK") == (action, True)
    assert row.queue is None or (len(row.queue) <= 80 and "\x00" not in row.queue)
