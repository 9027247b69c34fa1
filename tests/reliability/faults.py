"""Faults: a full disk, a file the process may not write, a damaged file, a held lock.

Each fault runs the same probe (open, read, write) and checks what durableq
promises: only DurableQErrors come out, they name the problem, and the file
is never replaced or damaged by durableq itself.  The tests and the stress
runner both call these functions; each raises AssertionError on a broken
promise and returns what it looked at.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import durableq
from durableq import SendEntry

from . import store
from .checker import Problems, check_nothing_lost, stored_by_id
from .fleet import launch
from .history import History
from .journal import read_journal, wait_for_line

NOBODY = 65534
READS = ("open", "list_queues", "peek")
WRITES = ("send", "receive", "stats", "create_queue")


@dataclass
class Outcome:
    op: str
    error: str | None  # the exception's class name, None when the call returned
    durableq_error: bool
    message: str


def attempt(op: str, call: Callable[[], Any]) -> Outcome:
    try:
        call()
    except durableq.DurableQError as exc:
        return Outcome(op, type(exc).__name__, True, exc.message)
    except Exception as exc:  # noqa: BLE001 - exactly what these tests look for
        return Outcome(op, type(exc).__name__, False, traceback.format_exc())
    return Outcome(op, None, False, "")


def probe(path: Path, queue: str = "jobs", busy_timeout: float = 10.0) -> dict[str, Outcome]:
    """Open, read and write; each call after a failed open opens again (and must fail alike)."""
    opened: list[durableq.Broker] = []

    def broker() -> durableq.Broker:
        if not opened:
            opened.append(durableq.open(path, busy_timeout=busy_timeout))
        return opened[0]

    def close() -> None:
        for broker in opened:
            broker.close()

    calls: dict[str, Callable[[], Any]] = {
        "open": broker,
        "list_queues": lambda: broker().list_queues(),
        "peek": lambda: broker().get_queue(queue).peek(limit=5),
        "send": lambda: broker().get_queue(queue).send("probe"),
        "receive": lambda: broker().get_queue(queue).receive(10),
        "stats": lambda: broker().get_queue(queue).stats(),
        "create_queue": lambda: broker().create_queue("probe-queue"),
        "close": close,
    }
    return {op: attempt(op, call) for op, call in calls.items()}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sample_file(path: Path, messages: int = 3000) -> Path:
    """A durableq file with ``messages`` messages in queue "jobs", closed (its WAL checkpointed)."""
    with durableq.open(path, durability="normal") as broker:
        queue = broker.create_queue("jobs")
        for start in range(0, messages, 10):
            queue.send_batch([SendEntry(str(i), f"m{start + i}." + "x" * 200) for i in range(10)])
    return path


def _only_durableq_errors(outcomes: dict[str, Outcome], problems: Problems, where: str) -> None:
    for outcome in outcomes.values():
        if outcome.error is not None and not outcome.durableq_error:
            problems.add(
                f"{where}: {outcome.op} raised {outcome.error}, not a DurableQError:\n{outcome.message}"
            )


# -- a damaged file -----------------------------------------------------------------


def _pages(path: Path, table: str, kind: str) -> list[int]:
    with store.reading(path) as conn:
        return [
            n
            for (n,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ?", (table, kind)
            )
        ]


#: How ``damage`` can spoil a good file.
DAMAGES = (
    "header",
    "truncated to 1 byte",
    "truncated to 50 bytes",
    "truncated to one page less a byte",
    "truncated at a page boundary",
    "truncated mid-page",
    "last page missing",
    "schema page",
    "message pages",
    "index pages",
    "queue page",
    "counter page",
)
_PAGE = 4096
#: The b-tree pages whose headers each kind of garbage overwrites: (object name, page types).
_SMASHED = {
    "message pages": ("durableq_messages", ("leaf", "internal")),
    "index pages": ("durableq_ix_messages_visible", ("leaf",)),
    "queue page": ("durableq_queues", ("leaf",)),
    "counter page": ("durableq_queue_metrics", ("leaf",)),
}


def damage(good: Path, how: str, rng: random.Random) -> bytes:
    """The bytes of the good file truncated, or with garbage over some b-tree page headers."""
    data = good.read_bytes()
    pages = len(data) // _PAGE
    truncated = {
        "header": b"not an sqlite db" + data[16:],
        "truncated to 1 byte": data[:1],
        "truncated to 50 bytes": data[:50],
        "truncated to one page less a byte": data[: _PAGE - 1],
        "truncated at a page boundary": data[: rng.randrange(1, pages) * _PAGE],
        "truncated mid-page": data[: rng.randrange(_PAGE + 1, len(data) - 1)],
        "last page missing": data[:-_PAGE],
    }
    if how in truncated:
        return truncated[how]
    if how == "schema page":
        numbers = [1]
    else:
        name, kinds = _SMASHED[how]
        numbers = [n for kind in kinds for n in _pages(good, name, kind)]
    damaged = bytearray(data)
    for number in numbers:  # page numbers start at 1; page 1 starts with the 100-byte file header
        start = (number - 1) * _PAGE + (100 if number == 1 else 0)
        damaged[start : start + 12] = rng.randbytes(12)
    return bytes(damaged)


def check_damaged(path: Path, content: bytes, where: str) -> dict[str, Outcome]:
    """Write ``content`` to ``path`` and probe it: reported as DatabaseCorrupt, never replaced."""
    path.write_bytes(content)
    before = sha256(path)
    outcomes = probe(path, busy_timeout=1)
    problems = Problems()
    _only_durableq_errors(outcomes, problems, where)
    raised = {o.op: o.error for o in outcomes.values() if o.error}
    if not raised:
        problems.add(f"{where}: every call succeeded on a damaged file; nothing reported it")
    for op, error in raised.items():
        if error != "DatabaseCorrupt":
            problems.add(f"{where}: {op} reported the damage as {error}: {outcomes[op].message}")
    wrote = [op for op in WRITES if outcomes[op].error is None]
    if not wrote and sha256(path) != before:
        problems.add(f"{where}: every write failed, yet the file's bytes changed (it was rewritten)")
    problems.raise_if_any(where)
    return outcomes


# -- a file or folder the process may not write ------------------------------------


def as_user(uid: int, function: Callable[[], Any]) -> Any:
    """Run ``function`` in a forked child that dropped to ``uid``; return its JSON result.

    A fork, not a new interpreter: the interpreter lives under /root (mode 0700),
    where an unprivileged user cannot start it.  The parent has already imported
    everything the child runs.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write_end, json.dumps(function()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 1 << 16):
        data += chunk
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    assert status == 0, f"the unprivileged child failed (status {status})"
    return json.loads(data)


#: name -> (file owner, file mode, folder owner, folder mode); None: no file at all.
READ_ONLY_CASES: dict[str, tuple[int, int, int, int] | None] = {
    "read-only file": (0, 0o644, NOBODY, 0o755),
    "read-only folder": (NOBODY, 0o600, 0, 0o755),
    "read-only file and folder": (0, 0o644, 0, 0o755),
    "unreadable file": (0, 0o600, 0, 0o755),
    "no file, read-only folder": None,
}


def check_read_only(folder: Path, case: str) -> dict[str, Outcome]:
    """Probe a file the unprivileged user may not write: writes fail with a clear DatabaseError."""
    folder.mkdir(parents=True)
    path = folder / "queue.db"
    owners = READ_ONLY_CASES[case]
    if owners is not None:
        sample_file(path, messages=100)
        file_owner, file_mode, folder_owner, folder_mode = owners
        os.chown(path, file_owner, file_owner)
        os.chmod(path, file_mode)
        before = sha256(path)
    else:
        folder_owner, folder_mode = 0, 0o755
    os.chown(folder, folder_owner, folder_owner)
    os.chmod(folder, folder_mode)
    raw = as_user(NOBODY, lambda: {op: asdict(o) for op, o in probe(path).items()})
    outcomes = {op: Outcome(**fields) for op, fields in raw.items()}
    problems = Problems()
    _only_durableq_errors(outcomes, problems, case)
    for op in WRITES:
        outcome = outcomes[op]
        if outcome.error is None:
            problems.add(f"{case}: {op} succeeded on a file the process may not write")
        elif outcome.error not in ("DatabaseReadOnly", "DatabaseError") or str(path) not in outcome.message:
            problems.add(
                f"{case}: {op} raised {outcome.error}: {outcome.message!r}; "
                "expected a DatabaseError naming the file"
            )
    if owners is not None and sha256(path) != before:
        problems.add(f"{case}: the file's bytes changed")
    problems.raise_if_any(case)
    return outcomes


@contextlib.contextmanager
def permissive_folder(parent: Path | None = None) -> Iterator[Path]:
    """A fresh folder the unprivileged user can reach (pytest's own are 0700, under /tmp/pytest-of-root)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="durableq-reliability-", dir=parent))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- a full disk ----------------------------------------------------------------------


def _tmpfs(folder: Path, size: int) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]
    return subprocess.run(mount, capture_output=True, check=False).returncode == 0


def tmpfs_works(folder: Path) -> bool:
    """Whether this machine lets us mount a small tmpfs (as root in a container it may not)."""
    probe_folder = folder / "tmpfs-probe"
    if not _tmpfs(probe_folder, 1 << 20):
        return False
    subprocess.run(["umount", str(probe_folder)], check=True)
    return True


def check_disk_full(folder: Path, how: str) -> Counter[str]:
    """Send until the disk (tmpfs) or the file size limit (RLIMIT_FSIZE) is full.

    The errors must say so (DatabaseFull, or a DatabaseError that names the
    problem), and afterwards the file must pass integrity_check, hold every
    acknowledged send, and work again once there is room.
    """
    data = folder / "data"
    seed = folder / "seed.db"
    sample_file(seed, messages=20)
    size = seed.stat().st_size
    if how == "tmpfs":
        assert _tmpfs(data, size + (384 << 10)), "mounting a tmpfs failed"
    else:
        data.mkdir(parents=True)
    try:
        db = data / "full.db"
        shutil.copyfile(seed, db)
        journal = folder / "filler.jsonl"
        config = {
            "role": "filler",
            "db": str(db),
            "journal": str(journal),
            "seed": 0,
            "queue": "jobs",
            "file_size_limit": size + (256 << 10) if how == "rlimit" else None,
        }
        assert launch(config, journal.with_suffix(".err")).wait(120) == 0, journal.with_suffix(
            ".err"
        ).read_text()
        return _check_filled(db, journal, how)
    finally:
        if how == "tmpfs":
            subprocess.run(["umount", "-l", str(data)], check=False)


def _check_filled(db: Path, journal: Path, how: str) -> Counter[str]:
    entries = read_journal(journal)
    errors = [e for e in entries if e.kind == "error"]
    problems = Problems()
    if not errors:
        problems.add(f"{how}: the filler never ran out of room")
    for error in errors:
        text = error["msg"].replace(str(db), "the file").lower()  # the path itself may say "full"
        clear = error["code"] == "DatabaseFull" or (
            error["code"] == "DatabaseError"
            and any(w in text for w in ("full", "space", "size limit", "too large"))
        )
        if not clear:
            problems.add(
                f"{how}: a send that ran out of room raised {error['code']}: {error['msg']!r}, "
                "which does not say so"
            )
    verdict = store.integrity(db)
    if verdict != "ok":
        problems.add(f"{how}: integrity_check after the disk filled: {verdict}")
    check_nothing_lost(History(entries), stored_by_id(db), problems)
    problems.raise_if_any(f"disk full ({how})")
    acknowledged = sum(e.kind == "sent" for e in entries)
    (left_open,) = [e["paths"] for e in entries if e.kind == "open-files"]
    return Counter(
        faults=1,
        messages=acknowledged,
        close_errors=sum(e.kind == "close-error" for e in entries),
        files_left_open=len(left_open),
    )


# -- a held lock ------------------------------------------------------------------------


def check_locked(folder: Path, exclusive: bool, busy_timeout: float = 0.5) -> dict[str, Outcome]:
    """Another process holds the write lock: writes wait, then raise DatabaseLocked naming the busy
    timeout (with an exclusive lock, reads too)."""
    db = sample_file(folder / "locked.db", messages=10)
    journal = folder / "locker.jsonl"
    config = {"role": "locker", "db": str(db), "journal": str(journal), "seed": 0, "exclusive": exclusive}
    locker = launch(config, journal.with_suffix(".err"))
    try:
        wait_for_line(journal, "locked")
        outcomes = probe(db, busy_timeout=busy_timeout)
    finally:
        locker.kill()
        locker.wait()
    where = f"{'exclusive' if exclusive else 'write'} lock"
    problems = Problems()
    _only_durableq_errors(outcomes, problems, where)
    # In WAL mode readers go on beside a writer; an exclusive lock keeps them out too.
    must_fail = (*READS, *WRITES) if exclusive else WRITES
    for op in must_fail:
        outcome = outcomes[op]
        if outcome.error != "DatabaseLocked" or f"{busy_timeout:g} s" not in outcome.message:
            problems.add(
                f"{where}: {op} gave {outcome.error}: {outcome.message!r}; "
                "expected DatabaseLocked naming the busy timeout"
            )
    if not exclusive:
        for op in READS:
            if outcomes[op].error is not None:
                problems.add(
                    f"{where}: {op} failed beside a writer: {outcomes[op].error}: {outcomes[op].message}"
                )
    verdict = store.integrity(db)
    if verdict != "ok" or len(store.rows(db)) != 10:
        problems.add(f"{where}: after the lock: integrity {verdict}, {len(store.rows(db))} of 10 messages")
    problems.raise_if_any(where)
    return outcomes


def check_sqlite_file_of_another_application(folder: Path) -> None:
    """An SQLite file of another application whose names collide with durableq's is refused
    (NotADurableQDatabase) and left as it was.  (One whose tables do not collide is shared: see
    tests/test_shared_database.py.)"""
    path = folder / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE durableq_queues (name TEXT)")  # a name durableq did not make
        conn.execute("CREATE TABLE people (name TEXT)")
        conn.execute("INSERT INTO people VALUES ('ada')")
        conn.commit()
    before = sha256(path)
    outcomes = probe(path)
    assert all(o.error == "NotADurableQDatabase" for op, o in outcomes.items() if op != "close"), outcomes
    assert sha256(path) == before
