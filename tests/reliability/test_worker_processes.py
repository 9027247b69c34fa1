"""``durableq.Worker(processes=True)``: its worker processes must not outlive a supervisor killed
with SIGKILL.

A supervisor restarted after ``kill -9`` (by systemd, Kubernetes or a person)
would otherwise leave a second set of workers running that nobody supervises
or can stop with SIGTERM, and the next restart a third.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import psutil

import durableq

from .fleet import launch
from .journal import wait_for_line

GRACE = 15.0  # seconds the workers get to notice (real time: this is about processes)


def _working(supervisor: psutil.Process, db: Path) -> list[psutil.Process]:
    """The spawned worker processes that have the database open (so are past starting up)."""
    working = []
    for child in supervisor.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any(f.path == str(db) for f in child.open_files()):
                working.append(child)
    return working


def test_worker_processes_stop_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    db, journal = tmp_path / "queue.db", tmp_path / "supervisor.jsonl"
    with durableq.open(db) as broker:
        broker.create_queue("jobs")
    config = {"role": "supervisor", "db": str(db), "journal": str(journal), "seed": 0, "queue": "jobs"}
    process = launch(config, journal.with_suffix(".err"))
    supervisor = psutil.Process(process.pid)
    everything = [supervisor]
    try:
        wait_for_line(journal, "supervising")
        deadline = time.monotonic() + 60
        while len(workers := _working(supervisor, db)) < 2:
            assert time.monotonic() < deadline, "the worker processes never started"
            time.sleep(0.1)
        everything += supervisor.children(recursive=True)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + GRACE
        while (alive := [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert not alive, (
            f"{len(alive)} worker processes (pids {[w.pid for w in alive]}) kept running, "
            "receiving messages, "
            f"for {GRACE:g} s after their supervisor was killed with SIGKILL"
        )
    finally:
        for leftover in everything:
            try:
                leftover.kill()
            except psutil.NoSuchProcess:
                pass
