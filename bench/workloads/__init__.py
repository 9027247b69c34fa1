"""The workloads by number (``python -m bench --workloads 1,2,5``): 1-8 of issue 8, 9 the endpoint,
10 threads of one process (group commit), 11 the buffered client, 12 message history's cost,
13 request-response, 14 virtual queues, 15 large payloads and encryption at rest, 16 durableq on
PostgreSQL against durableq on SQLite, 17 the outbox (a row and its job in one transaction), 18 a
scheduler's idle cost and its delay from a tick to the send, 19 durableq
on PostgreSQL against pgmq and a minimal SQL floor, 20 fair queues (a noisy tenant's neighbours)."""

from __future__ import annotations

from ..endpoint import workload as endpoint
from ..model import Workload
from . import (
    buffered,
    concurrent,
    cycle,
    fairness,
    fifo,
    history,
    latency,
    longpoll,
    memory,
    outbox,
    payloads,
    phases,
    postgres,
    postgres_peers,
    rpc,
    schedules,
    threads,
    virtual,
)

WORKLOADS: dict[int, Workload] = {
    w.number: w
    for w in (
        Workload(1, cycle.single),
        Workload(2, cycle.batched),
        Workload(3, phases.run),
        Workload(4, concurrent.run),
        Workload(5, latency.run),
        Workload(6, longpoll.run),
        Workload(7, memory.run),
        Workload(8, fifo.run),
        Workload(9, endpoint.run),
        Workload(10, threads.run),
        Workload(11, buffered.run),
        Workload(12, history.run),
        Workload(13, rpc.run),
        Workload(14, virtual.run),
        Workload(15, payloads.run),
        Workload(16, postgres.run),
        Workload(17, outbox.run),
        Workload(18, schedules.run),
        Workload(19, postgres_peers.run),
        Workload(20, fairness.run),
    )
}
