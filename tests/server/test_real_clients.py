"""Real SQS clients of every generation run one scenario (clients/scenario.json) against the endpoint.

The clients: the current boto3 and AWS CLI (AWS JSON 1.0, from the test extra),
a query-era botocore 1.31 with its boto3 and AWS CLI (a virtual environment
made here, under build/clients/), and the JavaScript SDK v3 in a current (JSON)
and a query-era version (npm packages pinned in clients/package-lock.json,
installed here under build/clients/).  Both environments are made once and
reused while their pins are unchanged.  A client that cannot be installed
fails its test; none is skipped.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from .conftest import ServerProcess

CLIENTS = Path(__file__).parent / "clients"
SCENARIO = CLIENTS / "scenario.json"
BUILD = Path(__file__).resolve().parents[2] / "build" / "clients"
#: The last botocore (with its boto3 and AWS CLI) whose SQS model speaks the query protocol.
QUERY_ERA_PYTHON = ("botocore==1.31.17", "boto3==1.28.17", "awscli==1.29.17")
INSTALL_TIMEOUT = 600  # seconds; pip and npm on a fresh machine


def _fail(what: str, done: subprocess.CompletedProcess[str]) -> None:
    pytest.fail(f"{what} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def _made(folder: Path, stamp: str) -> bool:
    marker = folder / ".made"
    return marker.exists() and marker.read_text() == stamp


@pytest.fixture(scope="session")
def query_era_python() -> Path:
    """The python of a virtual environment with the query-era botocore, boto3 and AWS CLI."""
    folder = BUILD / "python-query"
    stamp = "\n".join(QUERY_ERA_PYTHON)
    BUILD.mkdir(parents=True, exist_ok=True)
    with FileLock(str(BUILD / "python-query.lock")):
        if not _made(folder, stamp):
            venv.create(folder, with_pip=True, clear=True)
            done = subprocess.run(
                [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", *QUERY_ERA_PYTHON],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
            if done.returncode != 0:
                _fail(f"installing {', '.join(QUERY_ERA_PYTHON)}", done)
            (folder / ".made").write_text(stamp)
    return folder / "bin" / "python"


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """A folder whose node_modules holds the pinned JavaScript SDK v3 SQS clients (npm ci)."""
    folder = BUILD / "node"
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.fail("node and npm are needed for the JavaScript SDK clients (apt-get install nodejs npm)")
    lock = (CLIENTS / "package-lock.json").read_bytes()
    stamp = hashlib.sha256(lock).hexdigest()
    BUILD.mkdir(parents=True, exist_ok=True)
    with FileLock(str(BUILD / "node.lock")):
        if not _made(folder, stamp):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for name in ("package.json", "package-lock.json"):
                shutil.copy(CLIENTS / name, folder / name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
            if done.returncode != 0:
                _fail("npm ci of the JavaScript SDK clients", done)
            (folder / ".made").write_text(stamp)
    return folder


def _current_python_cli() -> list[str]:
    return [sys.executable, str(CLIENTS / "run_cli.py"), str(Path(sys.executable).parent / "aws")]


# client -> (the protocol it must speak, how to make its command line)
CLIENT_COMMANDS: dict[str, tuple[str, Any]] = {
    "boto3-current": ("json", lambda r: [sys.executable, str(CLIENTS / "run_python.py")]),
    "boto3-1.28-query": (
        "query",
        lambda r: [str(r.getfixturevalue("query_era_python")), str(CLIENTS / "run_python.py")],
    ),
    "awscli-current": ("json", lambda r: _current_python_cli()),
    "awscli-1.29-query": (
        "query",
        lambda r: [
            str(python := r.getfixturevalue("query_era_python")),
            str(CLIENTS / "run_cli.py"),
            str(python.parent / "aws"),
        ],
    ),
    "js-sdk-v3-current": (
        "json",
        lambda r: ["node", str(CLIENTS / "run_node.mjs"), str(r.getfixturevalue("node_clients")), "sqs-json"],
    ),
    "js-sdk-v3-3.445-query": (
        "query",
        lambda r: [
            "node",
            str(CLIENTS / "run_node.mjs"),
            str(r.getfixturevalue("node_clients")),
            "sqs-query",
        ],
    ),
}


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path / "clients.db") as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("client", list(CLIENT_COMMANDS))
def test_client_runs_the_scenario(
    client: str, request: pytest.FixtureRequest, fresh_server: ServerProcess
) -> None:
    protocol, command = CLIENT_COMMANDS[client]
    done = subprocess.run(
        [*command(request), fresh_server.url, str(SCENARIO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        _fail(f"the {client} scenario run", done)
    header, *outcomes = (json.loads(line) for line in done.stdout.splitlines())
    assert header == {"protocol": protocol}, f"{client} speaks {header}, not {protocol}"
    check(json.loads(SCENARIO.read_text(encoding="utf-8"))["steps"], outcomes, fresh_server.url, protocol)


def check(steps: list[dict[str, Any]], outcomes: list[dict[str, Any]], endpoint: str, protocol: str) -> None:
    """Every step's outcome is what the scenario expects (all mismatches reported at once)."""
    assert len(outcomes) == len(steps), f"{len(outcomes)} outcomes for {len(steps)} steps"
    saved: dict[str, Any] = {"endpoint": endpoint}
    problems = []
    for number, (step, outcome) in enumerate(zip(steps, outcomes), 1):
        where = f"step {number} {step['call']}"
        if "error" in step:
            if "error" not in outcome:
                problems.append(f"{where}: expected the error {step['error']}, got {outcome}")
                continue
            expected = dict(step["error"])
            if "message_query" in expected:
                query_text = expected.pop("message_query")
                if protocol == "query":
                    expected["message"] = query_text
            for key, wanted in expected.items():
                if not matches(outcome["error"].get(key), wanted, saved):
                    problems.append(
                        f"{where}: error {key} {outcome['error'].get(key)!r}, expected {wanted!r}"
                    )
            continue
        if "result" not in outcome:
            problems.append(f"{where}: expected a result, got {outcome}")
            continue
        result = outcome["result"]
        for name, path in step.get("save", {}).items():
            saved[name] = pick(result, path)
        for path, wanted in step.get("expect", {}).items():
            got = pick(result, path)
            if not matches(got, wanted, saved):
                problems.append(f"{where}: {path} is {got!r}, expected {substitute(wanted, saved)!r}")
    assert not problems, "\n".join(problems)


def matches(got: Any, wanted: Any, saved: dict[str, Any]) -> bool:
    if wanted is None:  # absent, or an empty list, map or text
        return got in (None, [], {}, "")
    if wanted == {"$any": True}:
        return got not in (None, [], {}, "")
    return bool(got == substitute(wanted, saved))


def substitute(value: Any, saved: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for name, text in saved.items():
            value = value.replace("${" + name + "}", str(text))
        return value
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, saved) for k, v in value.items()}
    return value


def pick(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, list):
            value = value[int(part)] if int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def md5_of_attributes(attributes: dict[str, dict[str, Any]]) -> str:
    """AWS's digest of message attributes, written here from its documentation (independent of the server)."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        attribute = attributes[name]
        binary = "BinaryValue" in attribute
        value = (
            base64.b64decode(attribute["BinaryValue"]["$base64"])
            if binary
            else attribute["StringValue"].encode()
        )
        for part in (name.encode(), attribute["DataType"].encode()):
            digest.update(len(part).to_bytes(4, "big") + part)
        digest.update(b"\x02" if binary else b"\x01")
        digest.update(len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()


def test_the_scenario_expects_digests_by_aws_algorithm() -> None:
    # The scenario's expected digests are constants; they must follow AWS's algorithm, not the server's code.
    steps = json.loads(SCENARIO.read_text(encoding="utf-8"))["steps"]
    (send,) = [
        s
        for s in steps
        if s["call"] == "SendMessage" and "MessageAttributes" in s["params"] and "expect" in s
    ]
    attributes = send["params"]["MessageAttributes"]
    assert send["expect"]["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    assert (
        send["expect"]["MD5OfMessageBody"] == hashlib.md5(send["params"]["MessageBody"].encode()).hexdigest()
    )
    (batch,) = [
        s
        for s in steps
        if s["call"] == "SendMessageBatch" and s["params"]["QueueUrl"] == "${std}" and "expect" in s
    ]
    first = batch["params"]["Entries"][0]
    assert batch["expect"]["Successful.0.MD5OfMessageAttributes"] == md5_of_attributes(
        first["MessageAttributes"]
    )
    assert {a["DataType"].split(".")[0] for a in attributes.values()} == {"String", "Number", "Binary"}
    assert any("." in a["DataType"] for a in attributes.values())  # custom type labels too
