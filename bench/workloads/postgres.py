"""W16: durableq on PostgreSQL against durableq on SQLite, on this machine.

Two parts, each with SQLite as the reference ("× ref" is PostgreSQL's speed relative to SQLite's):

* **Throughput under concurrency.**  1, 8 and 32 worker processes (``bench/procs.py``), each running
  the cycle send one message → receive one → delete it on one standard queue, for a fixed time, at
  durability full and normal.  Every round gets a fresh SQLite file or a fresh PostgreSQL database.
  Besides the rate, the correctness counts: errors (a ``DurableQError`` a worker met), messages
  received twice, messages lost.
* **Receive latency against a backlog** of ~0, 10 thousand and 100 thousand visible messages
  (filled with ``send_batch``), as W5 does for SQLite: receives timed one by one in turns across every
  depth and engine, each message deleted, the backlog refilled after each turn.

The workload starts its own PostgreSQL cluster (``tests/pgcluster.py``, fsync on) in the scratch
folder, beside the SQLite files, so both engines' fsyncs land on the same filesystem, and stops it at
the end.  Without PostgreSQL's server binaries it fails with the reason: nothing is skipped.
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import durableq
from durableq.errors import DurableQError

from .. import procs
from ..backlog import label
from ..compare import WARMUP, Metric, alternate, collect, in_rounds
from ..model import Config, Measurement, WorkloadResult, percentile
from .postgres_engines import KEY, QUEUE, Engines, rows_left, server_settings

log = logging.getLogger(__name__)

#: 200 bytes per message, the same for both engines.
BODY = "x" * 200
SYSTEMS = ("sqlite", "postgresql")
REFERENCE = "sqlite"
DURABILITIES = ("full", "normal")
#: The backlog part runs at W5's durability: fsync's cost is the same at every depth and would only
#: blur the depth effect this part looks for.
LATENCY_DURABILITY = "normal"
#: Untimed cycles each worker runs after opening its broker, before the start line: the first
#: statements of a connection (parsing, caches, first pages) are not the steady state.
WORKER_WARMUP = 5

THROUGHPUT = Metric("throughput", "msg/s")
ERRORS = Metric("errors", "count", "lower", summed=True)
DUPLICATES = Metric("received twice", "messages", "lower", summed=True)
LOST = Metric("lost", "messages", "lower", summed=True)
CYCLE_METRICS = (THROUGHPUT, ERRORS, DUPLICATES, LOST)

RECEIVE_P50 = Metric("receive p50", "µs", "lower")
RECEIVE_P99 = Metric("receive p99", "µs", "lower")
BOTH_P50 = Metric("receive+delete p50", "µs", "lower")
BOTH_P99 = Metric("receive+delete p99", "µs", "lower")
LATENCY_METRICS = (RECEIVE_P50, RECEIVE_P99, BOTH_P50, BOTH_P99)

#: Published figures of pgmq (tembo-io/pgmq), found with the search tool; not measured here.
PGMQ_NOTE = (
    "pgmq's published figures (not measured here, not comparable row for row): Tembo's post \"Over 30k "
    'messages per second on Postgres with Tembo Message Queue Stack" (Dec 6, 2023, PGMQ v1.0; '
    "https://tembo.io/blog/mq-stack-benchmarking) reports writes of over 150,000 msg/s by 20 concurrent "
    "writers each sending batches of 100 messages, and reads of up to 30,000 msg/s by 10 concurrent "
    'consumers each reading batches of 100, with minimal payloads (like {"username": "elvis"}), on a '
    "single Tembo Cloud Postgres instance of 16 vCPU and 32 GB of memory.  The parts of the post found do "
    "not say whether the queue was logged or unlogged, what synchronous_commit was, or whether a read "
    "included deleting or archiving.  Against the rows above: batches of 100 versus one message per "
    "call, 16 dedicated vCPUs versus 2 shared cores with client and server on the same machine.  The "
    "pgmq repository's README (as found) publishes no figures, and no other pgmq-published numbers "
    "were found."
)


# -- where the queues live: postgres_engines.py ----------------------------------------------------


# -- part 1: the cycle under concurrency --------------------------------------------------------------


def _worker(ready: Callable[[], None], target: str, durability: str, seconds: float) -> dict[str, Any]:
    """One worker process: send one, receive one, delete it, until ``seconds`` have passed since the
    start line.  A DurableQError is counted (its first words kept) and the worker goes on."""
    broker = durableq.open(target, durability=durability)
    queue = broker.get_queue(QUEUE)
    for _ in range(WORKER_WARMUP):
        queue.send(BODY)
        while not (messages := queue.receive()):
            pass
        queue.delete(messages[0].receipt_handle)
    ready()
    deadline = time.monotonic() + seconds
    sent = deleted = empty = 0
    errors: list[str] = []
    received: list[str] = []
    while time.monotonic() < deadline:
        try:
            queue.send(BODY)
            sent += 1
            # Another worker may take this worker's message, a claim passes over rows other claims
            # hold, and a receive that waited for a lock looks with the time it was called at: an
            # empty answer is asked again.  It cannot stay empty: every worker between its send and
            # its receive has added one message that no delete has taken yet.
            while not (messages := queue.receive()):
                empty += 1
            received.append(messages[0].message_id)
            queue.delete(messages[0].receipt_handle)
            deleted += 1
        except DurableQError as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
    finished = time.monotonic()
    broker.close()
    return {
        "sent": sent,
        "deleted": deleted,
        "empty": empty,
        "errors": errors,
        "received": received,
        "finished": finished,
    }


class Cycles:
    """The throughput part: per case, each engine in turn, a fresh target per round."""

    def __init__(self, engines: Engines, seconds: float) -> None:
        self._engines = engines
        self._seconds = seconds
        self.empty: collections.Counter[tuple[str, str]] = collections.Counter()
        self.error_samples: list[str] = []
        self.surplus: collections.Counter[tuple[str, str]] = collections.Counter()

    def one_round(self, system: str, durability: str, workers: int, case: str) -> dict[str, float]:
        target = self._engines.fresh(system, durability, f"{durability}-{workers}")
        try:
            tasks: list[procs.Task] = [(_worker, (target, durability, self._seconds))] * workers
            outcomes, started = procs.run(tasks, timeout=300 + self._seconds)
            left = rows_left(target)
        finally:
            self._engines.discard(target)
        elapsed = max(o["finished"] for o in outcomes) - started
        errors = [e for o in outcomes for e in o["errors"]]
        for error in errors[:3]:
            self.error_samples.append(f"{case}, {system}: {error}")
        receipts = collections.Counter(m for o in outcomes for m in o["received"])
        expected = sum(o["sent"] - o["deleted"] for o in outcomes)  # sent and not (yet) deleted
        self.empty[case, system] += sum(o["empty"] for o in outcomes)
        self.surplus[case, system] += max(0, left - expected)
        return {
            THROUGHPUT.name: sum(o["deleted"] for o in outcomes) / elapsed,
            ERRORS.name: len(errors),
            DUPLICATES.name: sum(1 for n in receipts.values() if n > 1),
            LOST.name: max(0, expected - left),
        }


def _case_name(durability: str, workers: int) -> str:
    return f"durability={durability}, {workers} worker{'s' if workers > 1 else ''}"


def _seconds(cfg: Config) -> float:
    return cfg.pick(5.0, 0.5)


def _worker_counts(cfg: Config) -> tuple[int, ...]:
    return cfg.pick((1, 8, 32), (1, 4))


def _depths(cfg: Config) -> tuple[int, ...]:
    return cfg.pick((0, 10_000, 100_000), (0, 500, 2_000))


def _depth_name(depth: int) -> str:
    return "~0" if depth == 0 else label(depth)


def _throughput(cfg: Config, engines: Engines) -> tuple[list[Measurement], list[str]]:
    seconds = _seconds(cfg)
    worker_counts = _worker_counts(cfg)
    cycles = Cycles(engines, seconds)
    measurements: list[Measurement] = []
    for durability in DURABILITIES:
        for workers in worker_counts:
            case = _case_name(durability, workers)
            one_round = functools.partial(cycles.one_round, durability=durability, workers=workers, case=case)
            results = alternate(SYSTEMS, cfg.rounds, one_round, f"{KEY} {case}")
            measurements += collect(case, SYSTEMS, CYCLE_METRICS, results, {})
    empties = "; ".join(
        f"{case}: " + ", ".join(f"{system} {cycles.empty[case, system]}" for system in SYSTEMS)
        for case in dict.fromkeys(case for case, _ in cycles.empty)
    )
    notes = [
        f"Throughput: each worker process opens its own broker, runs {WORKER_WARMUP} untimed cycles, waits "
        f"at the start line, then runs cycles for {seconds:g} s (a fixed time, not a fixed count, so a round "
        "takes as long on both engines); the round's rate is the cycles completed by all workers over the "
        "time from the start line to the last worker's end.  A cycle counts once its delete returned.",
        "Empty receives (asked again; summed over rounds): " + (empties or "none"),
        "'received twice': messages two receives returned (every round is shorter than the 30 s "
        "visibility timeout, so any is a second delivery within it); 'lost': messages sent and not "
        "deleted that the table, counted with the driver after the round, no longer holds.",
    ]
    surplus = {key: n for key, n in cycles.surplus.items() if n}
    if surplus:
        notes.append(
            "More rows left than sent-and-not-deleted (a call that raised but took effect): "
            + "; ".join(f"{case}, {system}: {n}" for (case, system), n in surplus.items())
        )
    if cycles.error_samples:
        notes.append("Errors workers met (up to 3 per round): " + " | ".join(cycles.error_samples))
    return measurements, notes


# -- part 2: receive latency against a backlog --------------------------------------------------------


def _fill(queue: durableq.Queue, count: int) -> None:
    """Send ``count`` messages in batches of 10 (send_batch, the API a user would fill with)."""
    full, rest = divmod(count, 10)
    entries = [durableq.SendEntry(str(i), BODY) for i in range(10)]
    for _ in range(full):
        result = queue.send_batch(entries)
        if result.failed:
            raise RuntimeError(f"send_batch failed while filling: {result.failed[0]}")
    if rest:
        queue.send_batch(entries[:rest])


def _timed(queue: durableq.Queue, count: int) -> tuple[list[float], list[float]]:
    """Time ``count`` receives one by one, and each receive with its delete; then put ``count``
    messages back (untimed) so the backlog keeps its size."""
    receives, cycles = [], []
    for _ in range(count):
        start = time.perf_counter()
        messages = queue.receive()
        got = time.perf_counter()
        if not messages:
            raise RuntimeError(f"the backlog of {queue.name} ran dry")
        queue.delete(messages[0].receipt_handle)
        receives.append(got - start)
        cycles.append(time.perf_counter() - start)
    _fill(queue, count)
    return receives, cycles


Key = tuple[str, str]  # (depth, system)


def latency(
    cfg: Config, engines: Engines, depths: tuple[int, ...] | None = None
) -> tuple[list[Measurement], list[str]]:
    """The backlog part, at ``depths`` (default: ~0, 10k, 100k; W19 measures ~0 alone)."""
    depths = depths or _depths(cfg)
    count, turn = cfg.pick((1000, 50), (100, 10))
    names = {depth: _depth_name(depth) for depth in depths}
    brokers = {
        system: durableq.open(
            engines.fresh(system, LATENCY_DURABILITY, "backlog"), durability=LATENCY_DURABILITY
        )
        for system in SYSTEMS
    }
    try:
        queues: dict[Key, durableq.Queue] = {}
        for system, broker in brokers.items():
            for depth in depths:
                queue = broker.create_queue(f"backlog-{depth}")
                start = time.perf_counter()
                # Each turn takes ``turn`` messages from the head, and the refill puts them back: the
                # queue holds between ``depth`` and ``depth + turn`` visible messages.
                _fill(queue, depth + turn)
                log.info(
                    "%s: %s backlog of %s filled in %.1f s",
                    KEY,
                    system,
                    f"{depth + turn:,}",
                    time.perf_counter() - start,
                )
                queues[names[depth], system] = queue
        for queue in queues.values():
            _timed(queue, min(WARMUP, turn))

        def one_round() -> dict[Key, dict[str, float]]:
            receives: dict[Key, list[float]] = {key: [] for key in queues}
            cycles: dict[Key, list[float]] = {key: [] for key in queues}
            for _ in range(count // turn):
                for key, queue in queues.items():
                    r, c = _timed(queue, turn)
                    receives[key] += r
                    cycles[key] += c
            return {
                key: {
                    RECEIVE_P50.name: percentile(receives[key], 50) * 1e6,
                    RECEIVE_P99.name: percentile(receives[key], 99) * 1e6,
                    BOTH_P50.name: percentile(cycles[key], 50) * 1e6,
                    BOTH_P99.name: percentile(cycles[key], 99) * 1e6,
                }
                for key in queues
            }

        results = in_rounds(cfg.rounds, f"{KEY} backlog", one_round)
    finally:
        for broker in brokers.values():
            broker.close()
    measurements: list[Measurement] = []
    for depth in depths:
        by_system = {system: results[names[depth], system] for system in SYSTEMS}
        measurements += collect(f"backlog {names[depth]}", SYSTEMS, LATENCY_METRICS, by_system, {})
    notes = [
        f"Backlog: durability={LATENCY_DURABILITY}; one SQLite file and one PostgreSQL database, each with "
        f"a queue per depth ({', '.join(names.values())} visible messages, give or take a turn of {turn}), "
        f"filled with send_batch; per round {count} receives per depth and engine, one by one, in turns "
        f"of {turn} across all depths and engines, each message deleted right after its receive, the "
        "queue refilled (untimed) after each turn.  'receive' times the receive call alone, "
        "'receive+delete' both calls; the value is the median over rounds of each round's percentile.",
    ]
    return measurements, notes


# -- the workload ---------------------------------------------------------------------------------


def run(cfg: Config) -> WorkloadResult:
    from tests import pgcluster

    started = time.perf_counter()
    # Fails here, with the reason, when the server binaries are missing or the server will not start.
    cluster = pgcluster.start(fsync=True, parent=cfg.workdir)
    try:
        server = server_settings(cluster)
        log.info("%s: PostgreSQL cluster up in %.1f s (%s)", KEY, time.perf_counter() - started, server)
        engines = Engines(cfg, cluster)
        cycle_rows, cycle_notes = _throughput(cfg, engines)
        latency_rows, latency_notes = latency(cfg, engines)
    finally:
        cluster.stop()
    return WorkloadResult(
        KEY,
        "durableq on PostgreSQL against durableq on SQLite",
        f"Part 1: {', '.join(map(str, _worker_counts(cfg)))} worker processes, each running send one "
        f"{len(BODY)}-byte message → receive one → delete it on one standard queue for "
        f"{_seconds(cfg):g} s, at durability full and normal, on a fresh SQLite file or a fresh PostgreSQL "
        "database per round; the engines take turns.  Part 2: receive latency against a backlog of "
        f"{', '.join(_depth_name(d) for d in _depths(cfg))} visible messages.  PostgreSQL: a cluster the "
        f"workload starts in the scratch folder (the SQLite files' filesystem), {server}; durability full "
        "= synchronous_commit on (a commit waits for its WAL flush), normal = synchronous_commit off; "
        "SQLite: WAL with synchronous=FULL / NORMAL.  Clients reach the server over TCP on 127.0.0.1, on "
        f"the same {os.cpu_count()} CPUs.",
        cycle_rows + latency_rows,
        reference=REFERENCE,
        notes=[*cycle_notes, *latency_notes, PGMQ_NOTE],
        unrated=(ERRORS.name, DUPLICATES.name, LOST.name),
    )
