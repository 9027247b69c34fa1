"""The endpoint as a process.

Restarts keep messages, the AWS CLI and `durableq serve` work, HTTP limits hold.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .conftest import ServerProcess, client


def test_messages_survive_a_killed_server(tmp_path: Path) -> None:
    db = tmp_path / "queues.db"
    with ServerProcess(db) as first:
        sqs = client(first.url)
        url = sqs.create_queue(QueueName="durable")["QueueUrl"]
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)]
        )
        first.process.kill()  # no clean shutdown: what was acknowledged is in the file
        first.process.wait(30)
    with ServerProcess(db) as second:
        received = client(second.url).receive_message(QueueUrl="durable", MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in received) == ["m0", "m1", "m2"]


def aws(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    executable = Path(sys.executable).parent / "aws"
    return subprocess.run(
        [str(executable), "--endpoint-url", url, "--output", "json", "sqs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_aws_cli(server: ServerProcess) -> None:
    created = aws(
        server.url, "create-queue", "--queue-name", "cli-jobs", "--attributes", "VisibilityTimeout=5"
    )
    assert created.returncode == 0, created.stderr
    url = json.loads(created.stdout)["QueueUrl"]
    sent = aws(
        server.url,
        "send-message",
        "--queue-url",
        url,
        "--message-body",
        "from the cli",
        "--message-attributes",
        '{"k": {"DataType": "String", "StringValue": "v"}}',
    )
    assert sent.returncode == 0, sent.stderr
    received = aws(
        server.url,
        "receive-message",
        "--queue-url",
        url,
        "--attribute-names",
        "All",
        "--message-attribute-names",
        "All",
    )
    assert received.returncode == 0, received.stderr
    (message,) = json.loads(received.stdout)["Messages"]
    assert message["Body"] == "from the cli" and message["MessageAttributes"]["k"]["StringValue"] == "v"
    assert message["MD5OfMessageAttributes"] == json.loads(sent.stdout)["MD5OfMessageAttributes"]
    deleted = aws(
        server.url, "delete-message", "--queue-url", url, "--receipt-handle", message["ReceiptHandle"]
    )
    assert deleted.returncode == 0, deleted.stderr
    missing = aws(server.url, "get-queue-url", "--queue-name", "cli-nowhere")
    assert missing.returncode != 0
    assert "(AWS.SimpleQueueService.NonExistentQueue)" in missing.stderr and "GetQueueUrl" in missing.stderr


def test_the_durableq_serve_command(tmp_path: Path) -> None:
    executable = Path(sys.executable).parent / "durableq"
    command = [
        str(executable if executable.exists() else shutil.which("durableq")),
        "--db",
        str(tmp_path / "q.db"),
        "serve",
    ]
    with ServerProcess(tmp_path / "q.db", command=command) as running:
        sqs = client(running.url)
        sqs.create_queue(QueueName="from-the-cli")
        assert sqs.list_queues()["QueueUrls"] == [f"{running.url}/000000000000/from-the-cli"]


def raw(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("POST", "/", body=body, headers=headers)
    response = connection.getresponse()
    answer = response.status, dict(response.getheaders()), response.read()
    connection.close()
    return answer


def test_http_limits_and_malformed_requests(server: ServerProcess) -> None:
    target = {"X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/x-amz-json-1.0"}
    status, headers, body = raw(server.url, b"{nope", target)
    assert status == 400 and json.loads(body)["__type"].endswith("#SerializationException")
    status, headers, body = raw(server.url, b"[" * 100_000, target)  # deeper than the parser goes
    assert status == 400 and json.loads(body)["__type"].endswith("#SerializationException")
    status, headers, body = raw(server.url, b"{}", {**target, "X-Amz-Target": "AmazonSQS.Explode"})
    assert status == 400 and headers["x-amzn-query-error"] == "InvalidAction;Sender"
    deep = b"Action=ListQueues&" + b".".join([b"a"] * 5_000) + b"=1"
    status, headers, body = raw(server.url, deep, {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and b"<Code>InvalidParameterValue</Code>" in body
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.putrequest("POST", "/")
    for name, value in {**target, "Content-Length": str(5 * 1024 * 1024)}.items():
        connection.putheader(name, value)
    connection.endheaders()  # the body never comes: the server answers from the headers alone
    response = connection.getresponse()
    assert response.status == 413 and b"RequestEntityTooLarge" in response.read()
    connection.close()


def test_many_clients_at_once(server: ServerProcess) -> None:
    sqs = client(server.url)
    url = sqs.create_queue(QueueName="busy")["QueueUrl"]
    received: list[str] = []
    lock = threading.Lock()

    def worker(number: int) -> None:
        own = client(server.url)
        for i in range(10):
            own.send_message(QueueUrl=url, MessageBody=f"{number}-{i}")
        while True:
            batch = own.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return
            own.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )
            with lock:
                received.extend(m["Body"] for m in batch)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    leftover: list[Any] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert sorted(received + [m["Body"] for m in leftover]) == sorted(
        f"{n}-{i}" for n in range(8) for i in range(10)
    )
    assert len(received) == len(set(received))  # nobody got a message twice


def test_clients_that_come_and_go_leave_no_open_files_behind(server: ServerProcess) -> None:
    # Each new connection is served by a reused thread: the library keeps one SQLite
    # connection per thread, so threads made per connection would pile up open files.
    import psutil

    process = psutil.Process(server.process.pid)
    target = {"X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/x-amz-json-1.0"}
    raw(server.url, b"{}", target)
    before = process.num_fds()
    for _ in range(200):  # like 200 runs of the AWS CLI, one connection each
        assert raw(server.url, b"{}", target)[0] == 200
    assert process.num_fds() <= before + 10 and process.num_threads() < 50


def test_sigterm_stops_the_server_whichever_thread_the_kernel_hands_it_to(tmp_path: Path) -> None:
    # The kernel may deliver a process's SIGTERM to any thread that does not block it.  Aimed at
    # uvicorn's thread (as the kernel may choose), it must still stop the server: found by the
    # hostile mix, where `durableq serve` outlived its SIGTERM by a minute.
    code = f"""
import signal, threading
import durableq.server

def aim_at_another_thread(server):
    print("ready", flush=True)
    uvicorn_thread = next(t for t in threading.enumerate() if t.name == "durableq-server")
    signal.pthread_kill(uvicorn_thread.ident, signal.SIGTERM)

durableq.server.run({str(tmp_path / "q.db")!r}, port=0, on_ready=aim_at_another_thread)
print("stopped", flush=True)
"""
    process = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.split() == ["ready", "stopped"]
