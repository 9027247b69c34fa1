"""W17: what the transactional outbox costs: an application row and its job in one transaction,
against the row then the job (two commits), against the bare row insert, on SQLite and PostgreSQL.

Each operation is what an application does per order:

* **bare insert**: insert an ``app_orders`` row on the application's own driver connection and commit
  (no queue at all: the reference);
* **two commits**: the same, then ``queue.send`` on durableq's own connection (a second commit, and
  the dual write a crash between them breaks);
* **one transaction**: the insert and ``queue.send(transaction=tx)`` on the application's connection,
  joined with ``broker.transaction(connection)``, and one commit by the application;
* **one transaction (own)**: ``broker.transaction()`` on durableq's connection, the insert through
  ``tx.execute`` and the send in it.

The application's connection commits at the broker's durability (SQLite: ``PRAGMA synchronous`` FULL
or NORMAL on the WAL file; PostgreSQL: ``synchronous_commit`` on or off), so every contender's commits
cost the same.  One process, one operation at a time; the contenders take turns within each round, on
one fresh SQLite file or PostgreSQL database per engine and durability.  PostgreSQL is a cluster the
workload starts in the scratch folder, as W16's.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

import durableq

from ..compare import alternate, collect
from ..model import Config, Measurement, WorkloadResult
from .postgres import THROUGHPUT
from .postgres_engines import QUEUE, Engines, server_settings

KEY = "W17"
SYSTEMS = ("bare insert", "two commits", "one transaction", "one transaction (own)")
REFERENCE = "bare insert"
ENGINES = ("sqlite", "postgresql")
DURABILITIES = ("full", "normal")
BODY = "x" * 200
ITEM = "y" * 100
INSERT = "INSERT INTO app_orders (item) VALUES (?)"


class _Contenders:
    """The four ways of saving an order on one target, with the application's connection open."""

    def __init__(self, target: str, durability: str) -> None:
        self.postgres = target.startswith("postgresql://")
        self.broker = durableq.open(target, durability=durability)
        self.queue = self.broker.get_queue(QUEUE)
        if self.postgres:
            import psycopg

            self.app: Any = psycopg.connect(target)
            self.app.execute(f"SET synchronous_commit = {'on' if durability == 'full' else 'off'}")
            self.app.execute("CREATE TABLE app_orders (id BIGSERIAL PRIMARY KEY, item TEXT NOT NULL)")
            self.insert = INSERT.replace("?", "%s")
        else:
            self.app = sqlite3.connect(target, timeout=30)
            self.app.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
            self.app.execute("CREATE TABLE app_orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
            self.insert = INSERT
        self.app.commit()
        self.runs: dict[str, Callable[[], None]] = dict(
            zip(SYSTEMS, (self.bare, self.two_commits, self.one_transaction, self.own), strict=True)
        )

    def _begin(self) -> None:
        if not self.postgres:
            self.app.execute("BEGIN IMMEDIATE")  # (as docs/guides/outbox.md advises: the write lock at once)

    def bare(self) -> None:
        self._begin()
        self.app.execute(self.insert, (ITEM,))
        self.app.commit()

    def two_commits(self) -> None:
        self.bare()
        self.queue.send(BODY)

    def one_transaction(self) -> None:
        self._begin()
        with self.broker.transaction(self.app) as tx:
            self.app.execute(self.insert, (ITEM,))
            self.queue.send(BODY, transaction=tx)
        self.app.commit()

    def own(self) -> None:
        with self.broker.transaction() as tx:
            tx.execute(INSERT, (ITEM,))
            self.queue.send(BODY, transaction=tx)

    def close(self) -> None:
        self.app.close()
        self.broker.close()


def _rate(run: Callable[[], None], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run()
    return count / (time.perf_counter() - start)


def _case(cfg: Config, engines: Engines, engine: str, durability: str, count: int) -> list[Measurement]:
    case = f"{engine}, durability={durability}"
    target = engines.fresh(engine, durability, f"{engine}-{durability}")
    contenders = _Contenders(target, durability)
    try:
        for run in contenders.runs.values():
            _rate(run, 10)  # warm-up: statement caches, first pages
        results = alternate(
            SYSTEMS,
            cfg.rounds,
            lambda system: {THROUGHPUT.name: _rate(contenders.runs[system], count)},
            f"{KEY} {case}",
        )
    finally:
        contenders.close()
        engines.discard(target)
    return collect(case, SYSTEMS, [THROUGHPUT], results, {})


def _ratio_notes(measurements: list[Measurement]) -> list[str]:
    """One transaction against two commits, per case (the "× ref" column is against the bare insert)."""
    lines = []
    for case in dict.fromkeys(m.case for m in measurements):
        value = {m.system: m.value for m in measurements if m.case == case}
        one, two, own = value["one transaction"], value["two commits"], value["one transaction (own)"]
        if one and two and own:
            lines.append(
                f"{case}: one transaction / two commits {one / two:.2f} (own connection {own / two:.2f})"
            )
    return ["One transaction against two commits (ratio of the medians): " + "; ".join(lines)]


def run(cfg: Config) -> WorkloadResult:
    from tests import pgcluster

    counts = {"full": cfg.pick(300, 10), "normal": cfg.pick(1000, 20)}
    cluster = pgcluster.start(fsync=True, parent=cfg.workdir)
    try:
        server = server_settings(cluster)
        engines = Engines(cfg, cluster, key=KEY)
        measurements: list[Measurement] = []
        for engine in ENGINES:
            for durability in DURABILITIES:
                measurements += _case(cfg, engines, engine, durability, counts[durability])
    finally:
        cluster.stop()
    return WorkloadResult(
        KEY,
        "the outbox: an application row and its job in one transaction",
        "One process, one order at a time: insert a row in the application's table (100 bytes) and send "
        f"its {len(BODY)}-byte job in one transaction on the application's connection (sqlite3 / psycopg "
        "joined with broker.transaction(connection)), or on durableq's own (tx.execute), against the row "
        "then the job (two commits) and the bare row insert; "
        + ", ".join(f"{n} orders per round and contender at durability {d}" for d, n in counts.items())
        + f"; a fresh SQLite file or PostgreSQL database per case; PostgreSQL: {server}.",
        measurements,
        reference=REFERENCE,
        notes=_ratio_notes(measurements),
    )
