"""W19: durableq on PostgreSQL against pgmq and a minimal SQL floor, on one cluster (issue 30).

* **Throughput.**  1 and 4 worker processes (``bench/procs.py``), each running the cycle send one
  message → receive one → delete it for a fixed time, as W16's workers do, on a fresh database per
  round (a copy of a template holding all three systems' schemas), the systems in turn:

  - ``minimal``: plain psycopg doing the least a queue with a visibility timeout and receipt handles
    does: ``INSERT``; one ``UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED) RETURNING`` claim
    that sets the deadline, counts the receive and issues a fresh handle; ``DELETE`` by id and handle;
    each statement its own transaction (autocommit);
  - ``pgmq``: pgmq's own SQL functions (``bench/peers/pgmq.sql``, vendored from its public repository:
    the benchmark installs it, durableq never uses it), ``pgmq.send`` / ``pgmq.read`` / ``pgmq.delete``
    on a logged queue, each call its own transaction, as its clients call them;
  - ``durableq``: the public API (``send``, ``receive``, ``delete``).

  All three at ``synchronous_commit = on`` (durableq's ``durability="full"``, pgmq's and the minimal
  floor's server default): a call returns once its commit is on disk.
* **Receive latency** at a backlog of ~0 messages, PostgreSQL against SQLite, as W16's backlog part
  (the issue's "receive p50 ≤ 3× SQLite's").
"""

from __future__ import annotations

import collections
import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import durableq

from .. import procs
from ..compare import WARMUP, alternate, collect, in_rounds
from ..model import Config, Measurement, WorkloadResult, percentile
from . import postgres
from .postgres_engines import QUEUE, Engines, server_settings

KEY = "W19"
SYSTEMS = ("minimal", "pgmq", "durableq")
REFERENCE = "minimal"
DURABILITY = "full"
#: The vendored install script of pgmq's SQL functions (see its header: version, commit, licence).
PGMQ_SQL = Path(__file__).resolve().parent.parent / "peers" / "pgmq.sql"
#: 200 bytes for every system; pgmq's messages are jsonb, so a JSON string of 200 characters.
BODY = json.dumps("x" * 198)
VISIBILITY_SECONDS = 30

_MINIMAL_SCHEMA = (
    "CREATE TABLE minimal_messages (id bigserial PRIMARY KEY, body text NOT NULL, "
    "visible_at timestamptz NOT NULL DEFAULT clock_timestamp(), receive_count integer NOT NULL DEFAULT 0, "
    "handle text)",
    "CREATE INDEX minimal_messages_visible ON minimal_messages (visible_at)",
)
_MINIMAL = {
    "send": "INSERT INTO minimal_messages (body) VALUES (%s)",
    "receive": (
        "UPDATE minimal_messages SET visible_at = clock_timestamp() + make_interval(secs => %s), "
        "receive_count = receive_count + 1, handle = md5(random()::text) "
        "WHERE id = (SELECT id FROM minimal_messages WHERE visible_at <= clock_timestamp() "
        "ORDER BY visible_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, handle"
    ),
    "delete": "DELETE FROM minimal_messages WHERE id = %s AND handle = %s",
}
_PGMQ = {
    "send": f"SELECT pgmq.send('{QUEUE}', %s::jsonb)",
    "receive": f"SELECT msg_id FROM pgmq.read('{QUEUE}', %s, 1)",
    "delete": f"SELECT pgmq.delete('{QUEUE}', %s::bigint)",
}


class _Sql:
    """A plain psycopg client of the minimal floor or of pgmq: one connection, autocommit."""

    def __init__(self, url: str, statements: dict[str, str]) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self._sql = statements

    def send(self) -> None:
        self._conn.execute(self._sql["send"], (BODY,))

    def receive(self) -> tuple[Any, ...] | None:
        row = self._conn.execute(self._sql["receive"], (VISIBILITY_SECONDS,)).fetchone()
        return tuple(row) if row else None

    def delete(self, token: tuple[Any, ...]) -> None:
        self._conn.execute(self._sql["delete"], token)

    def close(self) -> None:
        self._conn.close()


class _Durableq:
    def __init__(self, url: str) -> None:
        self._broker = durableq.open(url, durability=DURABILITY)
        self._queue = self._broker.get_queue(QUEUE)

    def send(self) -> None:
        self._queue.send(BODY)

    def receive(self) -> str | None:
        messages = self._queue.receive()
        return messages[0].receipt_handle if messages else None

    def delete(self, token: str) -> None:
        self._queue.delete(token)

    def close(self) -> None:
        self._broker.close()


def _client(system: str, url: str) -> Any:
    if system == "durableq":
        return _Durableq(url)
    return _Sql(url, _MINIMAL if system == "minimal" else _PGMQ)


def _worker(ready: Callable[[], None], system: str, url: str, seconds: float) -> dict[str, Any]:
    """One worker process: send one, receive one, delete it, until ``seconds`` have passed since the
    start line (an empty receive, another worker having taken the message, is asked again)."""
    client = _client(system, url)
    for _ in range(postgres.WORKER_WARMUP):
        client.send()
        while (token := client.receive()) is None:
            pass
        client.delete(token)
    ready()
    deadline = time.monotonic() + seconds
    cycles = empty = 0
    while time.monotonic() < deadline:
        client.send()
        while (token := client.receive()) is None:
            empty += 1
        client.delete(token)
        cycles += 1
    finished = time.monotonic()
    client.close()
    return {"cycles": cycles, "empty": empty, "finished": finished}


class _Databases:
    """A template database holding the three systems' schemas (durableq migrated, pgmq installed, the
    minimal table), and a fresh copy of it per round."""

    def __init__(self, cfg: Config, cluster: Any) -> None:
        from tests import pgcluster

        self._cluster = cluster
        self._pg = pgcluster
        self._serial = 0
        self._template = pgcluster.create_database(cluster, f"{KEY.lower()}_peers")
        url = cluster.url(self._template)
        with durableq.open(url, durability=DURABILITY) as broker:
            broker.create_queue(QUEUE)
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(PGMQ_SQL.read_text())
            conn.execute("SELECT pgmq.create(%s)", (QUEUE,))
            for statement in _MINIMAL_SCHEMA:
                conn.execute(statement)
            (self.pgmq_version,) = conn.execute(
                "SELECT substring(%s from 'pgmq ([0-9.]+)')", (PGMQ_SQL.read_text()[:200],)
            ).fetchone()

    def fresh(self) -> str:
        self._serial += 1
        name = self._pg.create_database(
            self._cluster, f"{KEY.lower()}_{self._serial}", template=self._template
        )
        return str(self._cluster.url(name))

    def discard(self, url: str) -> None:
        self._pg.drop_database(self._cluster, url.rsplit("/", 1)[1])


THROUGHPUT = postgres.THROUGHPUT


def _worker_counts(cfg: Config) -> tuple[int, ...]:
    return cfg.pick((1, 4), (1,))  # quick: the harness only (each worker is a process to spawn)


def _case_name(workers: int) -> str:
    return f"{workers} worker{'s' if workers > 1 else ''}"


def _throughput(cfg: Config, databases: _Databases) -> tuple[list[Measurement], list[str]]:
    seconds = postgres._seconds(cfg)
    empty: collections.Counter[tuple[str, str]] = collections.Counter()
    measurements: list[Measurement] = []

    def one_round(system: str, workers: int, case: str) -> dict[str, float]:
        url = databases.fresh()
        try:
            tasks: list[procs.Task] = [(_worker, (system, url, seconds))] * workers
            outcomes, started = procs.run(tasks, timeout=300 + seconds)
        finally:
            databases.discard(url)
        empty[case, system] += sum(o["empty"] for o in outcomes)
        elapsed = max(o["finished"] for o in outcomes) - started
        return {THROUGHPUT.name: sum(o["cycles"] for o in outcomes) / elapsed}

    for workers in _worker_counts(cfg):
        case = _case_name(workers)
        run = functools.partial(one_round, workers=workers, case=case)
        results = alternate(SYSTEMS, cfg.rounds, run, f"{KEY} {case}")
        measurements += collect(case, SYSTEMS, (THROUGHPUT,), results, {})
    notes = [
        f"Throughput: each worker process opens its client, runs {postgres.WORKER_WARMUP} untimed cycles, "
        f"waits at the start line, then runs cycles for {seconds:g} s; the round's rate is the cycles of "
        "all workers over the time from the start line to the last worker's end; a fresh database per "
        "round and system.  Empty receives (asked again; summed over rounds): "
        + ", ".join(f"{case}, {system} {n}" for (case, system), n in empty.items()),
        f"pgmq {databases.pgmq_version} (bench/peers/pgmq.sql, its SQL functions installed in the "
        "benchmark's cluster without the extension packaging): pgmq.send(queue, jsonb), "
        f"pgmq.read(queue, {VISIBILITY_SECONDS}, 1), pgmq.delete(queue, msg_id), one call per "
        "transaction; pgmq has no receipt handles (a message is deleted by its id, whoever holds it).",
    ]
    return measurements, notes


#: The least any client-server receive costs: one round trip of a bare prepared statement.
ROUND_TRIP = "SELECT 1 round trip"


def _round_trip(cfg: Config, url: str) -> tuple[list[Measurement], list[str]]:
    """p50 of a bare ``SELECT 1`` (prepared, autocommit) per round: the bound of any receive that
    crosses to the server, against which the receive latency target is read."""
    import psycopg

    count = cfg.pick(1000, 100)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        for _ in range(WARMUP):
            conn.execute("SELECT 1").fetchone()

        def one_round() -> dict[str, dict[str, float]]:
            samples = []
            for _ in range(count):
                start = time.perf_counter()
                conn.execute("SELECT 1").fetchone()
                samples.append(time.perf_counter() - start)
            return {ROUND_TRIP: {postgres.RECEIVE_P50.name: percentile(samples, 50) * 1e6}}

        results = in_rounds(cfg.rounds, f"{KEY} round trip", one_round)
    rows = collect("backlog ~0", (ROUND_TRIP,), (postgres.RECEIVE_P50,), results, {})
    note = (
        f"'{ROUND_TRIP}': {count} bare SELECT 1 per round on one psycopg connection (prepared, autocommit), "
        "timed one by one after the receive rounds, its p50 in the 'receive p50' row: no receive through "
        "a server can take less, so it bounds the PostgreSQL/SQLite receive ratio on this machine."
    )
    return rows, [note]


def run(cfg: Config) -> WorkloadResult:
    from tests import pgcluster

    cluster = pgcluster.start(fsync=True, parent=cfg.workdir)
    try:
        server = server_settings(cluster)
        databases = _Databases(cfg, cluster)
        rows, notes = _throughput(cfg, databases)
        latency_rows, latency_notes = postgres.latency(cfg, Engines(cfg, cluster, KEY), depths=(0,))
        trip_rows, trip_notes = _round_trip(cfg, cluster.url())
        latency_rows += trip_rows
        latency_notes += trip_notes
    finally:
        cluster.stop()
    return WorkloadResult(
        KEY,
        "durableq on PostgreSQL against pgmq and a minimal SQL floor",
        f"{' and '.join(map(str, _worker_counts(cfg)))} worker processes, each running send one"
        f" {len(BODY)}-byte message → receive one → "
        f"delete it for {postgres._seconds(cfg):g} s, on a fresh database per round, the systems in turn, "
        f"all at synchronous_commit on; then receive latency at a backlog of ~0, PostgreSQL against "
        f"SQLite (as W16's backlog part).  Cluster: {server}; clients over TCP on 127.0.0.1.",
        rows + latency_rows,
        reference=REFERENCE,
        case_references={m.case: postgres.REFERENCE for m in latency_rows},
        notes=[*notes, *latency_notes],
    )
