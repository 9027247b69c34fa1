"""Where W16's queues live: a fresh SQLite file in the scratch folder or a fresh database of the
workload's PostgreSQL cluster per round, and a look at them with the plain drivers, outside durableq
(the rows a round left, the server's settings).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import durableq

from ..model import Config

if TYPE_CHECKING:
    from tests.pgcluster import Cluster

#: The workload's name: its folder in the scratch space, its log lines and its section of the report.
KEY = "W16"
#: The one queue every fresh target holds.
QUEUE = "jobs"


class Engines:
    """Fresh places for a queue on either engine: a SQLite file in the scratch folder, or a new
    database of the workload's PostgreSQL cluster (a copy of a template migrated once)."""

    def __init__(self, cfg: Config, cluster: Cluster, key: str = KEY) -> None:
        from tests import pgcluster

        self._key = key  # the workload's: its files' folder, its databases' prefix
        self._cfg = cfg
        self._cluster = cluster
        self._pg = pgcluster
        self._serial = itertools.count()
        self._template = f"{key.lower()}_template"
        pgcluster.create_database(cluster, self._template)
        durableq.open(cluster.url(self._template)).close()  # migrate once; copies start at head

    def fresh(self, system: str, durability: str, label_: str) -> str:
        """A new, empty target with the queue created (untimed); returns what durableq.open takes."""
        number = next(self._serial)
        if system == "sqlite":
            target = str(self._cfg.path(self._key, label_, f"{number}.db"))
        else:
            name = self._pg.create_database(
                self._cluster, f"{self._key.lower()}_{number}", template=self._template
            )
            target = self._cluster.url(name)
        with durableq.open(target, durability=durability) as broker:
            broker.create_queue(QUEUE)
        return target

    def discard(self, target: str) -> None:
        """Drop a round's database (PostgreSQL) or file (SQLite): the next round starts afresh."""
        if target.startswith("postgresql://"):
            self._pg.drop_database(self._cluster, target.rsplit("/", 1)[1])
            return
        for suffix in ("", "-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)


@contextmanager
def _raw(target: str) -> Iterator[Any]:
    """A plain driver connection to ``target`` (autocommit), outside durableq."""
    if target.startswith("postgresql://"):
        import psycopg

        # durableq's tables are in its schema (the default one).
        with psycopg.connect(target, autocommit=True, options="-c search_path=durableq") as pg:
            yield pg
        return
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def rows_left(target: str) -> int:
    """How many messages the queue's table holds, counted by the driver, not by durableq."""
    marker = "%s" if target.startswith("postgresql://") else "?"
    statement = (
        "SELECT count(*) FROM durableq_messages "
        f"WHERE queue_id = (SELECT id FROM durableq_queues WHERE name = {marker})"
    )
    with _raw(target) as conn:
        (count,) = conn.execute(statement, (QUEUE,)).fetchone()
    return int(count)


def server_settings(cluster: Cluster) -> str:
    with _raw(cluster.url()) as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("server_version", "fsync", "full_page_writes", "shared_buffers", "wal_sync_method")
        }
    return ", ".join(f"{name} {value}" for name, value in settings.items())
