"""W9: the SQS endpoint under load, new server beside the old one (the reference) and moto_server."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..model import Config, Measurement, WorkloadResult, percentile
from . import scenarios, servers

T = TypeVar("T")

SYSTEMS = ("new", "old", "moto")
#: A scenario that has not finished after this long is reported as stalled (the old server's
#: thread per connection makes it wait behind long polls instead of failing).
STALL = 120.0


def _raise_open_files(wanted: int) -> None:
    """Thousands of client sockets in one process: lift the soft limit as far as the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def _run(coroutine: Coroutine[Any, Any, T]) -> T | None:
    async def bounded() -> T:
        return await asyncio.wait_for(coroutine, STALL)

    try:
        return asyncio.run(bounded())
    except TimeoutError:
        return None


def run(cfg: Config) -> WorkloadResult:
    clients = cfg.pick((1, 16, 128), (1, 4))
    messages = cfg.pick(800, 40)
    cap = cfg.pick(10.0, 2.0)
    waiting = cfg.pick(1000, 50)
    samples = cfg.pick(20, 3)
    polls, slow = cfg.pick((2000, 500), (100, 20))
    _raise_open_files(2 * (polls + slow) + 1000)
    found: dict[tuple[str, str, str], Measurement] = {}
    notes: list[str] = []

    def add(case: str, system: str, metric: str, unit: str, value: float, better: str = "higher") -> None:
        key = (case, system, metric)
        if key not in found:
            found[key] = Measurement(
                case, system, metric, unit, better="lower" if better == "lower" else "higher"
            )
        found[key].samples.append(value)

    with servers.old_tree() as old:
        if old is None:
            notes.append("The old server was not measured: this is not a git checkout of durableq.")
        for r in range(cfg.rounds):
            for system in SYSTEMS:
                if system == "old" and old is None:
                    continue
                db = cfg.path("W9", system, str(r)) if system != "moto" else cfg.path("W9-unused")
                with servers.start(system, db, old) as server:
                    for count in clients:
                        phases = _run(scenarios.throughput(server, count, messages, cap))
                        for name, phase in (phases or {}).items():
                            case = f"{name}, {count} client{'s' if count > 1 else ''}"
                            add(case, system, "ops/s", "ops/s", phase.rate)
                            add(case, system, "p50", "ms", phase.p50, "lower")
                            add(case, system, "p99", "ms", phase.p99, "lower")
                    woken = _run(scenarios.wakeup(server, waiting, samples))
                    case = f"wake-up, {waiting} idle long polls"
                    if woken is None or not woken["latencies"]:
                        notes.append(
                            f"{system}, round {r + 1}: the wake-up scenario stalled or woke no poll."
                        )
                    else:
                        add(case, system, "p50", "ms", percentile(woken["latencies"], 50), "lower")
                        add(case, system, "p99", "ms", percentile(woken["latencies"], 99), "lower")
                    memory = _run(scenarios.idle_memory(server, waiting))
                    if memory is not None:
                        add(
                            f"memory, {waiting} idle connections",
                            system,
                            "per connection",
                            "KiB",
                            memory["kib_per_connection"],
                            "lower",
                        )
                    if system == "new":  # the others hold a thread per connection: they would stall
                        held = _run(scenarios.capacity(server, polls, slow, 16, cap))
                        case = f"16 clients cycling beside {polls} long polls and {slow} slow clients"
                        if held is None:
                            notes.append(f"round {r + 1}: the capacity scenario stalled.")
                        else:
                            add(case, system, "cycles/s", "cycles/s", held["rate"])
                            add(case, system, "p99", "ms", held["p99"], "lower")
                            add(case, system, "failed requests", "requests", held["failures"], "lower")
    return WorkloadResult(
        "W9",
        "The SQS endpoint: durableq serve (uvicorn) against the old http.server endpoint and moto_server",
        f"Each client has one keep-alive connection and speaks AWS JSON 1.0 (one light client for every "
        f"server).  Throughput: {messages} messages sent, received, deleted, then cycled, shared by the "
        f"clients, each phase capped at {cap:g} s.  Wake-up: {waiting} long polls wait on an empty queue; "
        f"{samples} single sends, the time from the send's answer to a poll's answer.  Memory: the server's "
        f"RSS growth per connection that made one request and sits idle.  Capacity (new server only): "
        f"16 clients cycle for {cap:g} s while {polls} long polls wait and {slow} clients send a header "
        "line every 5 s without ever finishing.  Durability full.",
        sorted(found.values(), key=lambda m: (m.case, SYSTEMS.index(m.system))),
        reference="old",
        notes=notes,
    )
