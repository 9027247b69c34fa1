"""Shared fixtures: real SQLite files in a temporary folder, a real PostgreSQL server, and a fake
clock for time rules.

One contract suite, every engine: a test that uses ``broker`` (or ``queue``, ``fifo``, ``target``)
runs once on a SQLite file and once on a PostgreSQL database (ids ``[sqlite]`` and
``[postgresql]``); ``@pytest.mark.sqlite_only("why")`` keeps a test about the SQLite file itself
to that engine, ``@pytest.mark.postgres_only("why")`` one about PostgreSQL to its own.  The server
is a throw-away cluster started once per run (tests/pgcluster.py);
when it cannot start, every PostgreSQL test fails with the reason, none is skipped.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

import durableq
from durableq.limits import DEFAULT_POSTGRES_SCHEMA

from . import pgcluster

START = 1_800_000_000.0  # 2027-01-15, well past 2038 in milliseconds' 32-bit range


class FakeClock:
    """A broker clock that moves only when a test says so (thread-safe)."""

    def __init__(self, start: float = START) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def threads_inside(code: CodeType) -> list[int]:
    """The threads of this process (their idents) now running ``code``, at any depth of their stack."""
    inside = []
    for ident, frame in sys._current_frames().items():
        while frame is not None:
            if frame.f_code is code:
                inside.append(ident)
                break
            frame = frame.f_back  # type: ignore[assignment]
    return inside


class HeldLook:
    """Holds the next look of a receive (``Receiver._attempt``, in whichever thread runs it) until
    :meth:`open`: the one way the tests catch a receive in the middle of its claim.  Armed for one
    look at a time, so the test's own receives afterwards pass."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from durableq.ops.receive import Receiver

        self.armed, self.opened = threading.Event(), threading.Event()
        attempt, held = Receiver._attempt, self

        def gated(self: Receiver, *args: Any) -> Any:
            if held.armed.is_set():
                held.armed.clear()
                held.opened.wait(30)
            return attempt(self, *args)

        self.code = gated.__code__
        monkeypatch.setattr(Receiver, "_attempt", gated)

    def arm(self) -> None:
        """Hold the next look."""
        self.armed.set()

    def open(self) -> None:
        """Let the held look (and every later one) run."""
        self.opened.set()

    def holding(self) -> bool:
        """A look is held now."""
        return bool(threads_inside(self.code))


@pytest.fixture
def held_look(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldLook]:
    """A :class:`HeldLook`, opened when the test ends (a held thread never outlives it)."""
    held = HeldLook(monkeypatch)
    yield held
    held.open()


def until(condition: Callable[[], object], what: str, timeout: float = 30) -> None:
    """Poll until ``condition()`` is true; fail loudly (saying ``what``) at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


async def until_async(condition: Callable[[], object], what: str, timeout: float = 30) -> None:
    """:func:`until` for a coroutine: polls without holding up its event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.002)


def until_long_polls_wait(count: int = 1) -> None:
    """Return once ``count`` threads of this process are inside a long poll's wait: a send after
    this call is one the poll waits for, not one it finds when it starts."""
    from durableq.ops.longpoll import ThreadWaiter

    until(lambda: len(threads_inside(ThreadWaiter.wait.__code__)) >= count, f"{count} long polls wait")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "queue.db"


ENGINES = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): the test is about the SQLite file itself; not run on PostgreSQL"
    )
    config.addinivalue_line(
        "markers", "postgres_only(reason): the test is about PostgreSQL itself (its driver, its schemas)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker
        engines = (
            ENGINES[:1] if marker("sqlite_only") else ENGINES[1:] if marker("postgres_only") else ENGINES
        )
        metafunc.parametrize("engine", engines)


#: Tests that share an expensive fixture run on one pytest-xdist worker (``make test`` runs the
#: suite on two, ``--dist loadgroup``), so that it starts once per run as without workers: the
#: folder's tests share one local Spark session and one Chromium; a module of the endpoint's tests
#: shares its server processes (module-scoped).  Every other test goes to whichever worker is free.
#: The two slowest analytics modules start Spark in processes of their own (a standalone cluster,
#: the command line), not the shared session: either worker, beside the rest of the analytics.
XDIST_GROUPS = {"tests/analytics/": "spark", "tests/dashboard/": "browser"}
XDIST_GROUPED_BY_MODULE = ("tests/server/",)
XDIST_UNGROUPED = ("tests/analytics/test_cluster.py::", "tests/analytics/test_quiet.py::")


def xdist_group(nodeid: str) -> str | None:
    """The worker group of a test (by its node id), or None: any worker."""
    if nodeid.startswith(XDIST_UNGROUPED):
        return None
    for folder, group in XDIST_GROUPS.items():
        if nodeid.startswith(folder):
            return group
    if nodeid.startswith(XDIST_GROUPED_BY_MODULE):
        return nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with the groups of :func:`xdist_group` besides ``xdist_group`` marks.

    Not by adding marks: xdist passes a mark's group to its scheduler by rewriting the test's node
    id, which pytest 9.2 no longer reads (pytest-xdist issue 1386), so the scheduler is told here.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Grouped(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope: str = super()._split_scope(nodeid)
            return (scope if scope != nodeid else None) or xdist_group(nodeid) or nodeid

    return Grouped(config, log)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[pgcluster.Cluster]:
    """One throw-away PostgreSQL cluster for the run (fsync off: no test here cuts the power)."""
    cluster = pgcluster.start(fsync=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_template(pg_cluster: pgcluster.Cluster) -> str:
    """A database migrated to head, that each test's database is a copy of."""
    pgcluster.create_database(pg_cluster, "durableq_template")
    durableq.open(pg_cluster.url("durableq_template")).close()
    return "durableq_template"


@pytest.fixture
def pg_url(pg_cluster: pgcluster.Cluster, pg_template: str) -> Iterator[str]:
    """A new PostgreSQL database for one test, migrated to head (a URL)."""
    name = pgcluster.create_database(pg_cluster, template=pg_template)
    try:
        yield pg_cluster.url(name)
    finally:
        pgcluster.drop_database(pg_cluster, name)


@pytest.fixture
def target(engine: str, db_path: Path, request: pytest.FixtureRequest) -> str:
    """Where a test's broker opens: a SQLite file, or a new PostgreSQL database (a URL)."""
    if engine == "sqlite":
        return str(db_path)
    url: str = request.getfixturevalue("pg_url")
    return url


def payload_dir(target: str, db_path: Path) -> str | None:
    """Where a test's PostgreSQL broker keeps large payloads: where the SQLite one would (None: the
    default beside the file)."""
    return None if not target.startswith("postgresql://") else f"{db_path}.payloads"


@pytest.fixture
def broker(target: str, db_path: Path, clock: FakeClock) -> Iterator[durableq.Broker]:
    with durableq.open(
        target, clock=clock, durability="normal", payload_dir=payload_dir(target, db_path)
    ) as opened:
        yield opened


def sql_rows(target: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` (SQL both engines share, ``?`` parameters), run outside durableq on
    either engine."""
    with raw_connection(target) as conn:
        return [tuple(row) for row in conn.execute(statement, params).fetchall()]


def sql_run(target: str, statement: str, *params: object) -> int:
    """Run ``statement`` (a write, committed at once) outside durableq; returns the rows it changed."""
    with raw_connection(target) as conn:
        changed: int = conn.execute(statement, params).rowcount
        return changed


@contextmanager
def raw_connection(target: str) -> Iterator[Any]:
    """A plain driver connection to ``target`` (autocommit) whose ``execute`` takes sqlite3's parameters
    (``?``, ``:name``): ``sqlite3`` for a file, psycopg for PostgreSQL (turned into psycopg's)."""
    if not target.startswith("postgresql://"):
        conn = sqlite3.connect(target, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()
        return
    import psycopg

    from durableq.engines.postgres.connection import placeholders

    class Spelled:
        def __init__(self, raw: psycopg.Connection[Any]) -> None:
            self.raw = raw

        def execute(self, statement: str, params: Any = ()) -> Any:
            return self.raw.execute(placeholders(statement), params or None)  # type: ignore[arg-type]

    # The application's schema first (a table a test creates is the application's, as on its own
    # connections), then durableq's: its tables, named unqualified, are found by their prefix.
    options = f"-c search_path=public,{DEFAULT_POSTGRES_SCHEMA}"
    with psycopg.connect(target, autocommit=True, cursor_factory=psycopg.ClientCursor, options=options) as pg:
        yield Spelled(pg)


@pytest.fixture
def queue(broker: durableq.Broker) -> durableq.Queue:
    return broker.create_queue("jobs")


@pytest.fixture
def fifo(broker: durableq.Broker) -> durableq.Queue:
    return broker.create_queue("jobs.fifo", fifo=True)
