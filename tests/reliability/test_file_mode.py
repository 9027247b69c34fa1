"""New database files (and their WAL and shared-memory index) are readable by their owner only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import durableq

from .fleet import launch
from .journal import read_journal

OWNER_ONLY = 0o600
CLI = Path(sys.executable).with_name("durableq")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_file_created_by_a_worker_process_is_private(tmp_path: Path) -> None:
    db, journal = tmp_path / "queue.db", tmp_path / "creator.jsonl"
    config = {"role": "creator", "db": str(db), "journal": str(journal), "seed": 0}
    assert launch(config, journal.with_suffix(".err")).wait(60) == 0, journal.with_suffix(".err").read_text()
    (modes,) = [e["modes"] for e in read_journal(journal) if e.kind == "modes"]
    assert modes == {"": OWNER_ONLY, "-wal": OWNER_ONLY, "-shm": OWNER_ONLY}, {
        k: oct(v) for k, v in modes.items()
    }


def test_a_file_created_by_the_cli_is_private(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    subprocess.run(
        [str(CLI), "--db", str(db), "init"], check=True, capture_output=True, preexec_fn=lambda: os.umask(0)
    )
    assert _mode(db) == OWNER_ONLY, oct(_mode(db))
    # SQLite gives the WAL and the index the mode of the database file; look while one is open.
    with durableq.open(db) as broker:
        broker.create_queue("jobs").send("x")
        assert {_mode(db.with_name(db.name + s)) for s in ("-wal", "-shm")} == {OWNER_ONLY}
