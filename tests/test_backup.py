"""``Broker.backup``: a consistent copy of a database in use, with what is still in its WAL."""

from __future__ import annotations

import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import durableq

#: A writer process: sends "0", "1", "2", ... one message per transaction, and appends each
#: body to its journal once the send returned (acknowledged), until the stop file appears.
WRITER = textwrap.dedent(
    """
    import os, sys
    import durableq

    db, journal, stop = sys.argv[1:4]
    with durableq.open(db, durability="normal") as broker, open(journal, "a") as acknowledged:
        queue = broker.get_queue("jobs")
        n = 0
        while not os.path.exists(stop):
            queue.send(str(n))
            acknowledged.write(f"{n}\\n")
            acknowledged.flush()
            n += 1
    """
)


def _acknowledged(journal: Path) -> list[int]:
    if not journal.exists():
        return []
    return [int(line) for line in journal.read_text().splitlines()]


def _bodies(path: Path) -> list[int]:
    """The message bodies of a durableq file, read with plain sqlite3 (nothing migrates or sweeps)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return sorted(int(body) for (body,) in conn.execute("SELECT body FROM durableq_messages"))
    finally:
        conn.close()


def _until(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_backup_while_a_writer_runs_is_one_committed_state(tmp_path: Path) -> None:
    db, journal, stop, copy = (tmp_path / name for name in ("live.db", "journal", "stop", "copy.db"))
    with durableq.open(db) as broker:
        broker.create_queue("jobs")
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(journal), str(stop)])
        try:
            _until(lambda: len(_acknowledged(journal)) >= 200)
            before = len(_acknowledged(journal))
            assert broker.backup(copy) == copy
            during = len(_acknowledged(journal))
            _until(lambda: len(_acknowledged(journal)) >= during + 100)  # it went on after the copy
        finally:
            stop.touch()
            assert writer.wait(timeout=60) == 0
    in_copy = _bodies(copy)
    # Every send acknowledged before the backup began is in it; one send is one transaction,
    # so a consistent copy holds exactly the first k messages for some k (no gap, no torn write).
    assert in_copy == list(range(len(in_copy)))
    assert before <= len(in_copy) <= len(_acknowledged(journal))
    with durableq.open(copy) as restored:
        assert restored.get_queue("jobs").stats().approximate_number_of_messages == len(in_copy)


def test_the_backup_holds_what_is_still_in_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "queue.db"
    with durableq.open(db) as broker:
        jobs = broker.create_queue("jobs")
        for n in range(50):
            jobs.send(str(n))
        wal = Path(f"{db}-wal")
        assert wal.stat().st_size > 0  # committed, not yet checkpointed into the main file
        naive = tmp_path / "naive.db"
        shutil.copyfile(db, naive)  # what "copy the file" does while a broker has it open
        broker.backup(tmp_path / "backup.db")
    assert len(_bodies(naive) if _has_messages_table(naive) else []) < 50
    assert _bodies(tmp_path / "backup.db") == list(range(50))
    assert not list(tmp_path.glob(".backup.db.*")), "no partial file is left behind"
    assert stat.S_IMODE((tmp_path / "backup.db").stat().st_mode) == 0o600


def _has_messages_table(path: Path) -> bool:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return (
            conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'durableq_messages'").fetchone()
            is not None
        )
    finally:
        conn.close()


def test_a_backup_never_replaces_a_file(tmp_path: Path) -> None:
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"precious")
    with durableq.open(tmp_path / "queue.db") as broker:
        with pytest.raises(durableq.InvalidParameterValue, match="exists; a backup is written to a new file"):
            broker.backup(existing)
        with pytest.raises(durableq.InvalidParameterValue, match=r"the folder .* does not exist"):
            broker.backup(tmp_path / "missing" / "copy.db")
        with pytest.raises(durableq.InvalidParameterValue, match="not a usable file name"):
            broker.backup(tmp_path / "nul\0.db")
        with pytest.raises(durableq.InvalidParameterValue, match="dest must be a file path"):
            broker.backup(42)  # type: ignore[arg-type]
    assert existing.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("queue.db")) == ["existing.db"]
