"""Transactions under SIGKILL (issue 29): the outbox and the transactional worker, killed at random.

- **The outbox run.**  A producer process per form of :meth:`durableq.Broker.transaction` (durableq's
  own connection with ``tx.execute``, a SQLAlchemy ORM ``Session``, a SQLAlchemy Core ``Connection``,
  the raw driver's connection) loops "insert an ``app_orders`` row + send a message whose body names
  its key" in one transaction, and is SIGKILLed at random and restarted; each incarnation goes on from
  the last key its form committed.  Afterwards every committed row must have exactly one message and
  every message its row.
- **The worker run.**  A queue full of keys; worker processes running ``durableq.Worker(queue,
  handler, transactional=True)``, whose handler inserts an ``app_effects`` row through the transaction
  (and now and then fails after it), are SIGKILLed at random and restarted.  After the kills, every key
  is either still in the queue or has its effect, never both and never neither; after a drain without
  kills, every key has exactly one effect and the queue is empty.

The application's tables are its own (``app_…``); durableq's state is read only through its API.  The
tests run these briefly on both engines; ``python -m tests.reliability.outbox --minutes N`` runs them
again and again (on a SQLite file and on a throw-away PostgreSQL cluster) and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import sqlalchemy
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import durableq

from ..conftest import raw_connection
from .fleet import Fleet
from .journal import Journal
from .roles import role

QUEUE = "outbox"
#: The forms of Broker.transaction a producer uses, one process each.
FORMS = ("own", "orm", "core", "driver")
#: The figures of a worker run that must be 0.
MISMATCHES = ("effects_twice", "effect_and_message", "deleted_without_effect", "left_twice")
#: Short, so that what a killed worker held comes back within the run.
VISIBILITY = 2


def _integer_key(db: str) -> str:
    return "BIGSERIAL" if db.startswith("postgresql://") else "INTEGER"


def create(db: str) -> None:
    """The queue and the application's tables (created beside durableq's, in the same database)."""
    with durableq.open(db) as broker:
        broker.create_queue(QUEUE, visibility_timeout=VISIBILITY)
    with raw_connection(db) as conn:
        conn.execute(
            "CREATE TABLE app_orders (form TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (form, n))"
        )
        # No unique key: an effect recorded twice must show as two rows, not as a failed insert.
        conn.execute(f"CREATE TABLE app_effects (id {_integer_key(db)} PRIMARY KEY, body TEXT NOT NULL)")


def _sqlalchemy_url(db: str) -> str:
    if db.startswith("postgresql://"):
        return db.replace("postgresql://", "postgresql+psycopg://", 1)
    return f"sqlite:///{db}"


# -- the processes -------------------------------------------------------------------------------


class _Base(DeclarativeBase):
    pass


class AppOrder(_Base):
    """An order row, as an application's ORM maps it."""

    __tablename__ = "app_orders"
    form: Mapped[str] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(primary_key=True)


class _Producer:
    """One form's way of committing an order row and its message together."""

    def __init__(self, db: str, form: str, broker: durableq.Broker) -> None:
        self.db, self.form, self.broker = db, form, broker
        self.queue = broker.get_queue(QUEUE)
        # SQLite: wait for the write lock as long as durableq's own connections do.
        args = {} if db.startswith("postgresql://") else {"timeout": 30}
        self.engine = sqlalchemy.create_engine(_sqlalchemy_url(db), connect_args=args)

    def last(self) -> int:
        with raw_connection(self.db) as conn:
            (n,) = conn.execute("SELECT max(n) FROM app_orders WHERE form = ?", (self.form,)).fetchone()
        return int(n or 0)

    def commit(self, n: int) -> None:
        body = f"{self.form}:{n}"
        if self.form == "own":
            with self.broker.transaction() as tx:
                tx.execute("INSERT INTO app_orders (form, n) VALUES (?, ?)", (self.form, n))
                self.queue.send(body, transaction=tx)
        elif self.form == "orm":
            with Session(self.engine) as session, self.broker.transaction(session) as tx:
                session.add(AppOrder(form=self.form, n=n))
                session.flush()
                self.queue.send(body, transaction=tx)
                session.commit()
        elif self.form == "core":
            with self.engine.connect() as conn, self.broker.transaction(conn) as tx:
                conn.execute(sqlalchemy.insert(AppOrder).values(form=self.form, n=n))
                self.queue.send(body, transaction=tx)
                conn.commit()
        else:
            self._driver(n, body)

    def _driver(self, n: int, body: str) -> None:
        if self.db.startswith("postgresql://"):
            import psycopg

            with psycopg.connect(self.db) as pg:  # leaving the block commits (psycopg's rule)
                with self.broker.transaction(pg) as tx:
                    pg.execute("INSERT INTO app_orders (form, n) VALUES (%s, %s)", (self.form, n))
                    self.queue.send(body, transaction=tx)
            return
        conn = sqlite3.connect(self.db, timeout=30)
        try:
            conn.execute("BEGIN IMMEDIATE")
            with self.broker.transaction(conn) as tx:
                conn.execute("INSERT INTO app_orders (form, n) VALUES (?, ?)", (self.form, n))
                self.queue.send(body, transaction=tx)
            conn.commit()
        finally:
            conn.close()


@role
def outbox_producer(config: dict[str, Any], journal: Journal) -> None:
    """Commit rows and their messages, from the form's last committed key on; until killed, or until
    ``rows`` more have committed."""
    with durableq.open(config["db"], durability="full") as broker:
        producer = _Producer(config["db"], config["form"], broker)
        n = first = producer.last()
        journal.write("ready", last=n)
        while "rows" not in config or n < first + config["rows"]:
            n += 1
            producer.commit(n)
        producer.engine.dispose()


def record(pause: float = 0.0, fail_share: float = 0.0, rng: random.Random | None = None) -> Any:
    """The transactional handler: the message's effect, an ``app_effects`` row, written through the
    transaction; then a random pause (kills land inside open transactions) and now and then a failure
    (the effect must roll back with it)."""
    lock = threading.Lock()
    chance = rng or random.Random()

    def handler(message: durableq.Message, tx: durableq.Transaction) -> None:
        tx.execute("INSERT INTO app_effects (body) VALUES (?)", (message.body,))
        with lock:
            wait, fail = chance.uniform(0, pause), chance.random() < fail_share
        time.sleep(wait)
        if fail:
            raise RuntimeError(f"{message.body} fails on purpose, after writing its effect")

    return handler


def _retry_soon(receive_count: int) -> int:
    return 1


@role
def outbox_worker(config: dict[str, Any], journal: Journal) -> None:
    with durableq.open(config["db"], durability="full") as broker:
        handler = record(pause=0.05, fail_share=0.05, rng=random.Random(config["seed"]))
        journal.write("ready")
        durableq.Worker(
            broker.get_queue(QUEUE),
            handler,
            transactional=True,
            concurrency=2,
            wait_time=1,
            backoff=_retry_soon,
            grace_period=1,
        ).run()


# -- the runs ------------------------------------------------------------------------------------


def kill_at_work(fleet: Fleet, kills: int, every: tuple[float, float]) -> None:
    """SIGKILL ``kills`` times a random process, ``every`` seconds after it is at work (its journal
    says ``ready``: starting Python and importing take seconds on a busy machine, and a kill there
    proves nothing), and restart it; the others work on meanwhile."""
    for _ in range(kills):
        victim = fleet.rng.choice(list(fleet.slots.values()))
        deadline = time.monotonic() + 120
        journal = victim.journals[-1]  # (created by the process: not there before it starts)
        while not journal.exists() or '"k":"ready"' not in journal.read_text(encoding="ascii"):
            fleet.raise_failures()  # (a process that died by itself)
            assert time.monotonic() < deadline, f"{victim.name} never got ready"
            time.sleep(0.02)
        time.sleep(fleet.rng.uniform(*every))
        fleet.kill(victim)
        fleet.start(victim)


def _receive_all(queue: durableq.Queue) -> list[durableq.Message]:
    """Every visible message (received once more each, hidden for the rest of the check)."""
    received: list[durableq.Message] = []
    while messages := queue.receive(max_messages=10, wait_time=0, visibility_timeout=600):
        received += messages
    return received


def _bodies(messages: list[durableq.Message]) -> Counter[str]:
    return Counter(m.body for m in messages)


def _rows(db: str, statement: str) -> list[Any]:
    with raw_connection(db) as conn:
        return [row[0] for row in conn.execute(statement).fetchall()]


def outbox_run(
    folder: Path, rng: random.Random, kills: int, every: tuple[float, float], db: str
) -> Counter[str]:
    """The producers killed ``kills`` times at random; then each commits a few more rows undisturbed;
    then rows and messages are compared.  Raises AssertionError on any mismatch."""
    create(db)
    with Fleet(folder / "journals", rng) as fleet:
        for form in FORMS:
            fleet.add(f"producer-{form}", role="outbox_producer", db=db, form=form)
        kill_at_work(fleet, kills, every)
        fleet.kill_all()
        fleet.raise_failures()
        for form in FORMS:  # each form goes on from its last commit after its last kill
            fleet.add(f"finish-{form}", role="outbox_producer", db=db, form=form, rows=5)
        fleet.wait_all(timeout=120)
        fleet.raise_failures()
        kills = fleet.kills
    rows = Counter(_rows(db, "SELECT form || ':' || n FROM app_orders"))
    with durableq.open(db) as broker:
        queue = broker.get_queue(QUEUE)
        messages = _bodies(_receive_all(queue))
        stats = queue.stats()
    figures: Counter[str] = Counter(
        kills=kills,
        rows=len(rows),
        messages=sum(messages.values()),
        duplicates=sum(n - 1 for n in messages.values() if n > 1),
        messages_without_row=len(messages.keys() - rows.keys()),
        rows_without_message=len(rows.keys() - messages.keys()),
    )
    for form in FORMS:
        figures[f"rows_{form}"] = sum(1 for key in rows if key.startswith(f"{form}:"))
    problems = {k: figures[k] for k in ("duplicates", "messages_without_row", "rows_without_message")}
    assert not any(problems.values()), (problems, dict(figures))
    assert stats.approximate_number_of_messages == 0, stats  # all received: none hidden from receive
    assert stats.approximate_number_of_messages_not_visible == figures["messages"], stats
    assert all(figures[f"rows_{form}"] >= 5 for form in FORMS), dict(figures)
    return figures


def worker_run(
    folder: Path, rng: random.Random, kills: int, every: tuple[float, float], db: str, messages: int
) -> Counter[str]:
    """Two transactional worker processes killed ``kills`` times at random on a queue of ``messages``
    keys; checked after the kills and again after a drain without kills."""
    create(db)
    keys = [f"key-{i}" for i in range(messages)]
    with durableq.open(db, durability="normal") as broker:
        queue = broker.get_queue(QUEUE)
        for start in range(0, messages, 10):
            batch = [durableq.SendEntry(str(i), key) for i, key in enumerate(keys[start : start + 10])]
            assert not queue.send_batch(batch).failed
    figures: Counter[str] = Counter(messages=messages)
    with Fleet(folder / "journals", rng) as fleet:
        for number in range(2):
            fleet.add(f"worker-{number}", role="outbox_worker", db=db)
        kill_at_work(fleet, kills, every)
        fleet.kill_all()
        fleet.raise_failures()
        figures["kills"] = fleet.kills
    with durableq.open(db, durability="normal") as broker:
        queue = broker.get_queue(QUEUE)
        # What the killed workers held returns by its visibility timeout (a real clock: they ran on it).
        deadline = time.monotonic() + 60
        while queue.stats().approximate_number_of_messages_not_visible:
            assert time.monotonic() < deadline, "messages held by killed workers never returned"
            time.sleep(0.1)
        held = _receive_all(queue)
        left = _bodies(held)
        effects = Counter(_rows(db, "SELECT body FROM app_effects"))
        figures["effects_after_kills"] = sum(effects.values())
        figures["left_after_kills"] = sum(left.values())
        figures.update(_mismatches(keys, effects, left))
        assert not any(figures[name] for name in MISMATCHES), dict(figures)
        for message in held:  # back to the queue, for the drain
            queue.change_visibility(message.receipt_handle, 0)
        durableq.Worker(queue, record(), transactional=True, concurrency=2, wait_time=1, idle_timeout=2).run()
        stats = queue.stats()
        left = _bodies(_receive_all(queue))
    effects = Counter(_rows(db, "SELECT body FROM app_effects"))
    figures["effects"] = sum(effects.values())
    figures["left"] = sum(left.values()) + stats.approximate_number_of_messages_not_visible
    final = _mismatches(keys, effects, left)
    figures.update({f"{name}_after_drain": n for name, n in final.items()})
    assert not any(final.values()) and not figures["left"], dict(figures)
    assert figures["effects"] == messages, dict(figures)
    return figures


def _mismatches(keys: list[str], effects: Counter[str], left: Counter[str]) -> Counter[str]:
    """What breaks "a message's delete commits with its effect": an effect written twice, an effect
    whose message is still in the queue, a message gone without its effect, a message there twice."""
    found: Counter[str] = Counter(
        effects_twice=sum(n - 1 for n in effects.values() if n > 1),
        effect_and_message=len(effects.keys() & left.keys()),
        deleted_without_effect=len(set(keys) - effects.keys() - left.keys()),
        left_twice=sum(n - 1 for n in left.values() if n > 1),
    )
    return found


def _iterations(engine: str, folder: Path, rng: random.Random, deadline: float) -> Counter[str]:
    """Outbox and worker runs on ``engine``, longer than the tests', until ``deadline``."""
    from tests import pgcluster

    cluster = pgcluster.start(fsync=True, parent=folder) if engine == "postgresql" else None
    totals: Counter[str] = Counter()
    try:
        while time.monotonic() < deadline:
            for name, run in (("outbox", outbox_run), ("worker", worker_run)):
                number = totals[f"{name}_runs"] = totals[f"{name}_runs"] + 1
                place = folder / f"{engine}-{name}-{number}"
                place.mkdir()
                db = str(place / "outbox.db")
                if cluster is not None:
                    db = cluster.url(pgcluster.create_database(cluster))
                if run is outbox_run:
                    figures = outbox_run(place, rng, kills=25, every=(0.05, 1.5), db=db)
                else:
                    figures = worker_run(place, rng, kills=25, every=(0.05, 1.5), db=db, messages=3000)
                print(f"{engine} {name} run {number}: {json.dumps(figures)}", flush=True)
                totals.update({f"{name}_{key}": n for key, n in figures.items()})
    finally:
        if cluster is not None:
            cluster.stop()
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=5, help="per engine (a run started is finished)")
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "all"), default="all")
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    engines = ("sqlite", "postgresql") if args.engine == "all" else (args.engine,)
    figures: dict[str, Any] = {"seed": args.seed}
    with tempfile.TemporaryDirectory(prefix="durableq-outbox-") as scratch:
        Path(scratch).chmod(0o711)  # (a PostgreSQL server running as another user reaches its data)
        for engine in engines:
            deadline = time.monotonic() + args.minutes * 60
            figures[engine] = _iterations(engine, Path(scratch), rng, deadline)
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
