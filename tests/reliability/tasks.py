"""Roles for one purpose each: a message move task, a migration up or down, filling a
disk, holding the write lock, creating a file, supervising worker processes."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import stat
import time

import psutil

import durableq
from durableq.engines import migrate
from durableq.engines.sqlite.database import Database

from . import handlers
from .journal import Journal
from .roles import Config, journaled_queue, open_broker, role


@role
def mover(config: Config, journal: Journal) -> None:
    """Starts a message move task and waits for it (the harness kills this process mid-way)."""
    with open_broker(config) as broker:
        task = broker.start_message_move(config["source"], max_per_second=config.get("rate"))
        journal.write("move-started", task=task.task_handle, to_move=task.to_move)
        broker.wait_for_message_move(task.task_handle)
        (ended,) = [
            t for t in broker.list_message_moves(config["source"]) if t.task_handle == task.task_handle
        ]
        journal.write("move-ended", status=ended.status, moved=ended.moved)


def _import_alembic() -> None:
    """Import alembic before journaling "migrating", so a kill after that line hits the migration itself."""
    import alembic.command
    import alembic.script  # noqa: F401


@role
def upgrader(config: Config, journal: Journal) -> None:
    """``durableq.open`` on a file at an older revision: it migrates to head."""
    _import_alembic()
    journal.write("migrating")
    durableq.open(config["db"]).close()
    journal.write("migrated")


@role
def downgrader(config: Config, journal: Journal) -> None:
    _import_alembic()
    journal.write("migrating")
    migrate.downgrade(Database(config["db"], durability="normal", busy_timeout=10), config["target"])
    journal.write("migrated")


@role
def filler(config: Config, journal: Journal) -> None:
    """Sends until the disk or the file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) stops it, then
    tries twice more; then closes the broker and journals which of the database's files it still has open."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if config.get("file_size_limit"):
        limit = config["file_size_limit"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    broker = open_broker(config)
    try:
        queue = journaled_queue(broker, journal, config["queue"], config)
        failures = 0
        for number in range(100_000):
            try:
                queue.send(f"fill.{number}." + "x" * config.get("body_size", 4000))
            except durableq.DurableQError:
                failures += 1  # journaled, with its code and message
                if failures == 3:
                    break
    finally:
        try:
            broker.close()
        except durableq.DurableQError as exc:  # its pending counters could not be written
            journal.write("close-error", code=exc.code, msg=exc.message)
        still_open = [f.path for f in psutil.Process().open_files() if f.path.startswith(config["db"])]
        journal.write("open-files", paths=still_open)


@role
def locker(config: Config, journal: Journal) -> None:
    """Holds the write lock (a raw ``BEGIN IMMEDIATE`` with a write) until killed; with
    ``exclusive``, in exclusive locking mode, which keeps readers out too."""
    conn = sqlite3.connect(config["db"], isolation_level=None)
    if config.get("exclusive"):
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE durableq_queues SET last_modified = last_modified")
    journal.write("locked")
    time.sleep(3600)


@role
def creator(config: Config, journal: Journal) -> None:
    """Creates a new file with umask 0 (so any mode but 0600 would show) and journals the
    modes of the file, its WAL and its shared-memory index while they are open."""
    os.umask(0)
    with open_broker(config) as broker:
        broker.create_queue("jobs").send("created")
        modes = {
            suffix: stat.S_IMODE(os.stat(config["db"] + suffix).st_mode) for suffix in ("", "-wal", "-shm")
        }
    journal.write("modes", modes=modes)


@role
def supervisor(config: Config, journal: Journal) -> None:
    """``durableq.Worker(processes=True)``: this process supervises worker processes it spawned."""
    with open_broker(config) as broker:
        queue = broker.get_queue(config["queue"])
        journal.write("supervising")
        durableq.Worker(queue, handlers.handle, concurrency=2, processes=True, wait_time=1).run()
