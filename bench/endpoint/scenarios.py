"""What the endpoint bench measures, one async function per scenario, each against one running server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..model import percentile
from .load import Connection, Timed
from .servers import Running

BODY = "x" * 200


@dataclass
class Phase:
    """One phase of one run: operations per second and per-operation latency (ms)."""

    rate: float
    p50: float
    p99: float
    failures: int

    @classmethod
    def of(cls, timed: Timed, count: int, seconds: float) -> Phase:
        ms = [x * 1000 for x in timed.latencies] or [float("nan")]
        return cls(
            count / seconds if seconds else 0.0, percentile(ms, 50), percentile(ms, 99), timed.failures
        )


async def _connections(server: Running, count: int) -> list[Connection]:
    connections = [Connection(server.host, server.port) for _ in range(count)]
    await asyncio.gather(*(c.open() for c in connections))
    return connections


async def _queue(connection: Connection) -> str:
    _, answer = await connection.call("CreateQueue", {"QueueName": f"bench-{uuid.uuid4().hex[:12]}"})
    return str(answer["QueueUrl"])


async def throughput(server: Running, clients: int, messages: int, cap: float) -> dict[str, Phase]:
    """Send N, receive N (one at a time, hidden for the run), delete N, then N send-receive-delete cycles.

    Each of ``clients`` clients does its share on a connection of its own; a
    phase stops early after ``cap`` seconds (the rate counts what was done).
    """
    connections = await _connections(server, clients)
    url = await _queue(connections[0])
    share = max(1, messages // clients)
    handles: list[list[str]] = [[] for _ in connections]
    results: dict[str, Phase] = {}

    async def run(name: str, job: Callable[[int, Connection, Timed, float], Awaitable[int]]) -> None:
        timed = Timed()
        started = time.perf_counter()
        deadline = started + cap
        done = await asyncio.gather(*(job(i, c, timed, deadline) for i, c in enumerate(connections)))
        results[name] = Phase.of(timed, sum(done), time.perf_counter() - started)

    async def send(i: int, c: Connection, timed: Timed, deadline: float) -> int:
        sent = 0
        while sent < share and time.perf_counter() < deadline:
            sent += await timed.call(c, "SendMessage", {"QueueUrl": url, "MessageBody": BODY}) is not None
        return sent

    async def receive(i: int, c: Connection, timed: Timed, deadline: float) -> int:
        empty = 0
        while len(handles[i]) < share and time.perf_counter() < deadline and empty < 3:
            answer = await timed.call(
                c, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1, "VisibilityTimeout": 600}
            )
            got = (answer or {}).get("Messages", [])
            empty = 0 if got else empty + 1
            handles[i].extend(m["ReceiptHandle"] for m in got)
        return len(handles[i])

    async def delete(i: int, c: Connection, timed: Timed, deadline: float) -> int:
        deleted = 0
        for handle in handles[i]:
            if time.perf_counter() >= deadline:
                break
            deleted += (
                await timed.call(c, "DeleteMessage", {"QueueUrl": url, "ReceiptHandle": handle}) is not None
            )
        return deleted

    async def cycle(i: int, c: Connection, timed: Timed, deadline: float) -> int:
        cycles = 0
        while cycles < share and time.perf_counter() < deadline:
            started = time.perf_counter()
            await c.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
            _, answer = await c.call("ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 600})
            for message in answer.get("Messages", []):
                await c.call("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"]})
            timed.latencies.append(time.perf_counter() - started)
            cycles += 1
        return cycles

    for name, job in (("send", send), ("receive", receive), ("delete", delete), ("cycle", cycle)):
        await run(name, job)
    with contextlib.suppress(Exception):
        await connections[0].call("DeleteQueue", {"QueueUrl": url})
    for c in connections:
        c.close()
    return results


async def _poll_forever(c: Connection, url: str, arrivals: asyncio.Queue[tuple[float, str]]) -> None:
    """A long poll, again and again; what it gets goes to ``arrivals`` with the time it came."""
    while True:
        try:
            _, answer = await c.call(
                "ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 20, "VisibilityTimeout": 600}
            )
        except Exception:  # noqa: BLE001 - a dropped long poll just polls again
            await asyncio.sleep(0.1)
            continue
        for message in answer.get("Messages", []):
            arrivals.put_nowait((time.perf_counter(), message["Body"]))


def waiting_receives(server: Running) -> int | None:
    """The new server's count of waiting long polls (None where there is no /health)."""
    try:
        with urllib.request.urlopen(f"http://{server.host}:{server.port}/health", timeout=5) as answer:
            return int(json.loads(answer.read()).get("waiting_receives", 0))
    except Exception:  # noqa: BLE001 - the old server and moto have no /health
        return None


async def _until_waiting(server: Running, count: int, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = await loop.run_in_executor(None, waiting_receives, server)
        if waiting is None:
            await asyncio.sleep(3)  # no way to tell: give the polls time to arrive
            return
        if waiting >= count:
            return
        await asyncio.sleep(0.1)


async def wakeup(server: Running, waiting: int, samples: int) -> dict[str, Any]:
    """``waiting`` idle long polls; one message at a time: ms from its send's answer to its arrival."""
    arrivals: asyncio.Queue[tuple[float, str]] = asyncio.Queue()
    pollers = await _connections(server, waiting)
    sender = (await _connections(server, 1))[0]
    url = await _queue(sender)
    tasks = [asyncio.ensure_future(_poll_forever(c, url, arrivals)) for c in pollers]
    latencies: list[float] = []
    lost = 0
    try:
        await _until_waiting(server, waiting)
        for i in range(samples):
            await sender.call("SendMessage", {"QueueUrl": url, "MessageBody": f"wake {i}"})
            sent = time.perf_counter()
            try:
                arrived, _ = await asyncio.wait_for(arrivals.get(), 30)
            except TimeoutError:
                lost += 1
                continue
            latencies.append((arrived - sent) * 1000)
            await asyncio.sleep(0.2)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in [*pollers, sender]:
            c.close()
    return {"latencies": latencies, "not_woken": lost}


async def idle_memory(server: Running, count: int) -> dict[str, float]:
    """Server RSS growth per connection that made one request and then sits idle (KiB)."""
    before = server.rss()
    connections = [Connection(server.host, server.port) for _ in range(count)]
    timed = Timed()
    await asyncio.gather(*(timed.call(c, "ListQueues", {}, timeout=10) for c in connections))
    await asyncio.sleep(1)
    after = server.rss()
    for c in connections:
        c.close()
    served = len(timed.latencies)
    return {"kib_per_connection": (after - before) / 1024 / max(served, 1), "served": served, "opened": count}


async def _slow_client(server: Running, stop: asyncio.Event) -> None:
    """A client that sends a header line every 5 seconds and never finishes its request."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(server.host, server.port)
            writer.write(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while not stop.is_set() and not reader.at_eof():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5)
                writer.write(b"X-Slow: 1\r\n")
                await writer.drain()
            writer.close()
        except (OSError, ConnectionError):
            await asyncio.sleep(1)


async def capacity(
    server: Running, long_polls: int, slow: int, clients: int, seconds: float
) -> dict[str, Any]:
    """Cycles of ``clients`` clients while ``long_polls`` long polls wait and ``slow`` slow clients dawdle."""
    arrivals: asyncio.Queue[tuple[float, str]] = asyncio.Queue()
    stop = asyncio.Event()
    pollers = [Connection(server.host, server.port) for _ in range(long_polls)]
    helper = (await _connections(server, 1))[0]
    idle_url = await _queue(helper)
    busy_url = await _queue(helper)
    background = [asyncio.ensure_future(_poll_forever(c, idle_url, arrivals)) for c in pollers]
    background += [asyncio.ensure_future(_slow_client(server, stop)) for _ in range(slow)]
    timed = Timed()
    cycle_seconds: list[float] = []
    done = 0
    try:
        await _until_waiting(server, long_polls)
        workers = [Connection(server.host, server.port) for _ in range(clients)]
        deadline = time.perf_counter() + seconds

        async def cycle(c: Connection) -> int:
            cycles = 0
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                sent = await timed.call(
                    c, "SendMessage", {"QueueUrl": busy_url, "MessageBody": BODY}, timeout=10
                )
                answer = await timed.call(
                    c, "ReceiveMessage", {"QueueUrl": busy_url, "VisibilityTimeout": 600}, 10
                )
                for message in (answer or {}).get("Messages", []):
                    await timed.call(
                        c,
                        "DeleteMessage",
                        {"QueueUrl": busy_url, "ReceiptHandle": message["ReceiptHandle"]},
                        10,
                    )
                if sent is not None and answer is not None:
                    cycles += 1
                    cycle_seconds.append(time.perf_counter() - started)
            return cycles

        started = time.perf_counter()
        done = sum(await asyncio.gather(*(cycle(c) for c in workers)))
        elapsed = time.perf_counter() - started
        rss = server.rss()
        for c in workers:
            c.close()
    finally:
        stop.set()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        for c in [*pollers, helper]:
            c.close()
    cycle_ms = [x * 1000 for x in cycle_seconds] or [float("nan")]
    return {
        "rate": done / elapsed,
        "p50": percentile(cycle_ms, 50),
        "p99": percentile(cycle_ms, 99),
        "failures": timed.failures,
        "rss_mib": rss / 2**20,
    }
