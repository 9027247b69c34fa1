"""Append-only journals: what one process did, one JSON line per event.

Every process of a run writes its own file.  Each line is a single
``os.write`` on a descriptor opened with ``O_APPEND``, so a SIGKILL lands
between two lines, never inside one: the checker can trust every line it
reads.  Lines are written *after* the call they report returned (a send, a
delete), or *before* it as an intent (a batch, a delete), never both in one
line, so a line never claims more than happened.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class Journal:
    """One process's journal file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"k": kind, "t": time.time(), **fields}, separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode("ascii"))  # ensure_ascii: one byte per character

    def close(self) -> None:
        os.close(self._fd)


@dataclass(frozen=True, slots=True)
class Entry:
    """One journal line, with where it came from (file name and line number)."""

    source: str
    line: int
    fields: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.fields["k"]

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


def read_journal(path: Path) -> list[Entry]:
    """Every line of one journal; a torn or unparsable line is an error of the harness itself."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise AssertionError(f"{path}: the last line is torn ({data[-80:]!r}); journal writes must be atomic")
    entries = []
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            entries.append(Entry(path.name, number, json.loads(raw)))
        except ValueError as exc:
            raise AssertionError(f"{path}:{number}: unreadable journal line {raw[:120]!r}") from exc
    return entries


def read_journals(folder: Path) -> list[Entry]:
    """The lines of every ``*.jsonl`` journal under ``folder``, file by file, in order."""
    return [entry for path in sorted(folder.glob("**/*.jsonl")) for entry in read_journal(path)]


def wait_for_line(path: Path, kind: str, timeout: float = 60) -> list[Entry]:
    """Wait until the journal at ``path`` holds a line of ``kind`` (a process reached a point)."""
    deadline = time.monotonic() + timeout
    while True:
        entries = read_journal(path) if path.exists() else []
        if any(entry.kind == kind for entry in entries):
            return entries
        assert time.monotonic() < deadline, f"{path.name} did not write {kind!r} within {timeout} s"
        time.sleep(0.02)
