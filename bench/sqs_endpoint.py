"""boto3 against the SQS endpoint: ``durableq serve`` (durability "full") side by side with ``moto_server``.

    python -m bench.sqs_endpoint                  # 5 rounds, 4 clients, 400 messages a phase
    python -m bench.sqs_endpoint --rounds 3 --clients 8 --messages 800 --scratch /var/tmp

Each round runs every workload on both servers, alternating which goes first,
so drift (a warming disk cache, another process) falls on both alike.  A
workload sends N messages, receives them and deletes them, with C boto3
clients in threads; each phase is timed on its own.  The table shows medians
of messages per second and the ratio durableq / moto.  Both servers run as
separate processes on 127.0.0.1, started afresh for every round (after a
warm-up), and every workload uses a new queue.  The clients share the
machine with the servers, as in a developer's test run.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

PHASES = ("send", "receive", "delete")
BODY = "x" * 200  # a small JSON-sized message


@dataclass(frozen=True)
class Workload:
    """How the phases call the API: one message per call, or batches of ten."""

    name: str
    batch: int


WORKLOADS = (Workload("one message per call", 1), Workload("batches of 10", 10))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


@contextmanager
def _server(argv: list[str], port: int) -> Iterator[str]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


def _client(url: str) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(max_pool_connections=64, retries={"max_attempts": 1}),
    )


def _parallel(clients: list[Any], job: Callable[[Any, int], None]) -> float:
    """Run ``job(client, index)`` in one thread per client; the wall time of the slowest."""
    errors: list[BaseException] = []

    def run(client: Any, index: int) -> None:
        try:
            job(client, index)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, i)) for i, c in enumerate(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _round(clients: list[Any], workload: Workload, messages: int) -> dict[str, float]:
    """Messages per second of each phase, on a fresh queue."""
    url = clients[0].create_queue(QueueName=f"bench-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    share = messages // len(clients)
    batch = workload.batch
    received: list[list[str]] = [[] for _ in clients]

    def send(client: Any, index: int) -> None:
        for start in range(0, share, batch):
            if batch == 1:
                client.send_message(QueueUrl=url, MessageBody=BODY)
            else:
                entries = [{"Id": str(i), "MessageBody": BODY} for i in range(min(batch, share - start))]
                client.send_message_batch(QueueUrl=url, Entries=entries)

    def receive(client: Any, index: int) -> None:
        # Hidden for the whole round, so what one client holds no other client gets.
        while len(received[index]) < share:
            answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=batch, VisibilityTimeout=600)
            got = answer.get("Messages", [])
            if not got and sum(map(len, received)) >= share * len(clients):
                return
            received[index].extend(m["ReceiptHandle"] for m in got)

    def delete(client: Any, index: int) -> None:
        handles = received[index]
        for start in range(0, len(handles), batch):
            if batch == 1:
                client.delete_message(QueueUrl=url, ReceiptHandle=handles[start])
            else:
                entries = [
                    {"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[start : start + batch])
                ]
                client.delete_message_batch(QueueUrl=url, Entries=entries)

    total = share * len(clients)
    rates = {}
    for phase, job in zip(PHASES, (send, receive, delete)):
        rates[phase] = total / _parallel(clients, job)
    assert sum(map(len, received)) == total, "a phase lost messages"
    rates["cycle"] = total / sum(total / rates[p] for p in PHASES)
    clients[0].delete_queue(QueueUrl=url)
    return rates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sqs_endpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4, help="boto3 clients, one thread each")
    parser.add_argument("--messages", type=int, default=400, help="messages per phase and round")
    parser.add_argument("--scratch", type=Path, help="folder of the durableq file (default: the temp folder)")
    args = parser.parse_args(argv)
    moto = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    folder = Path(tempfile.mkdtemp(prefix="sqs-bench-", dir=args.scratch))
    durableq_port, moto_port = _free_port(), _free_port()
    durableq_argv = [
        sys.executable,
        "-m",
        "durableq.server",
        "--db",
        str(folder / "bench.db"),
        "--port",
        str(durableq_port),
        "--durability",
        "full",
    ]
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        for number in range(args.rounds):
            # Fresh servers every round: moto slows down as a process ages (it keeps state),
            # and durableq reopens its file as after a restart.
            with (
                _server(durableq_argv, durableq_port) as durableq_url,
                _server([moto, "-p", str(moto_port)], moto_port) as moto_url,
            ):
                systems = {"durableq": durableq_url, "moto": moto_url}
                clients = {name: [_client(url) for _ in range(args.clients)] for name, url in systems.items()}
                for name in systems:  # warm up: connections, imports, the first queue
                    _round(clients[name], WORKLOADS[0], args.clients * 10)
                order = list(systems) if number % 2 == 0 else list(reversed(systems))
                for workload in WORKLOADS:
                    for name in order:
                        results.setdefault((workload.name, name), []).append(
                            _round(clients[name], workload, args.messages)
                        )
            print(f"round {number + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(_table(results, args))


def _table(results: dict[tuple[str, str], list[dict[str, float]]], args: argparse.Namespace) -> str:
    lines = [
        f"boto3, {args.clients} clients, {args.messages} messages a phase, median of {args.rounds} rounds "
        '(messages per second; durableq with durability="full")',
        "",
        "| workload | phase | durableq | moto | durableq / moto |",
        "|---|---|---:|---:|---:|",
    ]
    for workload in WORKLOADS:
        for phase in (*PHASES, "cycle"):
            ours = statistics.median(r[phase] for r in results[(workload.name, "durableq")])
            theirs = statistics.median(r[phase] for r in results[(workload.name, "moto")])
            label = "send + receive + delete" if phase == "cycle" else phase
            lines.append(
                f"| {workload.name} | {label} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.1f}× |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
