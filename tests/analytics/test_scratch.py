"""Snapshot copies of killed runs are removed by the next run; nothing else is (see
``durableq.analytics.scratch``).  No Spark: a snapshot is taken without it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import durableq
from durableq.analytics.scratch import MARKER, PREFIX
from durableq.analytics.snapshot import take

_TAKE_AND_WAIT = """
import sys, time
from durableq.analytics.snapshot import take
snapshot = take(sys.argv[1], time.time, None if sys.argv[2] == "-" else sys.argv[2])
print(snapshot.path, flush=True)
sys.stdin.read()  # until killed
"""


def _killed_run(db: Path, root: Path | None, env: dict[str, str] | None = None) -> Path:
    """The copy a process took of ``db`` under ``root`` before it was SIGKILLed."""
    child = subprocess.Popen(
        [sys.executable, "-c", _TAKE_AND_WAIT, str(db), "-" if root is None else str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    copy = Path(child.stdout.readline().decode().strip())
    os.kill(child.pid, signal.SIGKILL)
    child.wait(60)
    assert child.stdin is not None
    child.stdin.close()
    assert copy.is_file()  # it could not clean up
    return copy


def _database(tmp_path: Path) -> Path:
    db = tmp_path / "q.db"
    with durableq.open(db) as broker:
        broker.create_queue("jobs").send("x" * 1000)
    return db


def _foreign(root: Path) -> list[Path]:
    """Things beside run folders that are not durableq's to remove."""
    unmarked = root / f"{PREFIX}unmarked"  # the name, without a marker
    unmarked.mkdir()
    (unmarked / "data").write_text("keep")
    other_host = root / f"{PREFIX}other-host"  # a dead process's marker, of another host
    other_host.mkdir()
    (other_host / MARKER).write_text(
        json.dumps({"host": f"not-{socket.gethostname()}", "pid": 1, "started": None})
    )
    elsewhere = root.parent / "elsewhere"  # a link to a folder with a dead run's marker
    elsewhere.mkdir()
    (elsewhere / MARKER).write_text(json.dumps({"host": socket.gethostname(), "pid": 1, "started": None}))
    link = root / f"{PREFIX}link"
    link.symlink_to(elsewhere)
    odd = root / f"{PREFIX}marker-of-another-kind"
    odd.mkdir()
    (odd / MARKER).write_text('{"pid": 1}')
    plain = root / "notes.txt"
    plain.write_text("keep")
    return [unmarked, unmarked / "data", other_host, link, elsewhere / MARKER, odd, plain]


def test_the_next_run_removes_a_killed_runs_copy_and_nothing_else(tmp_path: Path) -> None:
    db, root = _database(tmp_path), tmp_path / "snapshots"
    root.mkdir()
    foreign = _foreign(root)
    live = take(db, time.time, root)  # a run of this process, under way
    killed = _killed_run(db, root)  # it did not remove the live run's folder
    assert live.path is not None and live.path.is_file()
    with_copy = take(db, time.time, root)
    try:
        assert not killed.exists() and not killed.parent.parent.exists()
        assert live.path.is_file() and all(os.path.lexists(p) for p in foreign)
    finally:
        with_copy.close()
        live.close()
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in foreign if p.parent == root)


def test_in_the_temp_folder_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db, temp = _database(tmp_path), tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    killed = _killed_run(db, None, {**os.environ, "TMPDIR": str(temp)})
    assert killed.is_relative_to(temp)
    take(db, time.time, None).close()
    assert list(temp.iterdir()) == []
