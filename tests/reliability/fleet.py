"""Real processes running roles: start them, SIGKILL them at random, restart them.

Each run of a role (an incarnation) gets its own journal, ``SLOT.NNNN.jsonl``,
and its stderr in ``SLOT.NNNN.err``.  A role that exits by itself with a
non-zero status is a failure of the run (its stderr says why).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Slot:
    name: str
    config: dict[str, Any]
    journals: list[Path] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    finished: bool = False  # its end was seen: by itself (reaped) or by our SIGKILL


def launch(config: dict[str, Any], stderr: Path, **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``python -m tests.reliability.launch`` with ``config`` (its own session, so kills stay local)."""
    with open(stderr, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.launch", json.dumps(config)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            **popen,
        )


class Fleet:
    """The role processes of one run, all journaling under ``folder``."""

    def __init__(self, folder: Path, rng: random.Random) -> None:
        self.folder = folder
        self.rng = rng
        self.slots: dict[str, Slot] = {}
        self.kills = 0
        self.failures: list[str] = []
        folder.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill_all()  # whatever happened, leave no role process behind

    def add(self, name: str, **config: Any) -> Slot:
        slot = self.slots[name] = Slot(name, config)
        self.start(slot)
        return slot

    def start(self, slot: Slot) -> None:
        journal = self.folder / f"{slot.name}.{len(slot.journals) + 1:04d}.jsonl"
        config = {**slot.config, "journal": str(journal), "seed": self.rng.randrange(2**31)}
        config["retry"] = [str(p) for p in slot.journals]  # what a producer may need to send again
        slot.journals.append(journal)
        slot.finished = False
        slot.process = launch(config, journal.with_suffix(".err"))

    def kill(self, slot: Slot) -> None:
        process = slot.process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            self.kills += 1
        slot.finished = True  # ended by us: not a failure of the role

    def running(self) -> list[Slot]:
        return [s for s in self.slots.values() if s.process is not None and s.process.poll() is None]

    def _reap(self) -> None:
        """Note processes that ended by themselves; a non-zero exit is a failure."""
        for slot in self.slots.values():
            process = slot.process
            if process is None or process.poll() is None or slot.finished:
                continue
            slot.finished = True
            if process.returncode != 0:
                err = slot.journals[-1].with_suffix(".err").read_text(errors="replace")
                self.failures.append(
                    f"{slot.journals[-1].name} exited with {process.returncode}:\n{err[-3000:]}"
                )

    def chaos(self, seconds: float, every: tuple[float, float], only: list[str] | None = None) -> None:
        """For ``seconds``, SIGKILL a random running process every ``every`` seconds and restart it."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(self.rng.uniform(*every), max(deadline - time.monotonic(), 0)))
            self._reap()
            victims = [s for s in self.running() if only is None or s.name in only]
            if victims and time.monotonic() < deadline:
                victim = self.rng.choice(victims)
                self.kill(victim)
                self.start(victim)

    def kill_all(self) -> None:
        self._reap()
        for slot in self.slots.values():
            self.kill(slot)

    def wait_all(self, timeout: float) -> None:
        """Wait for every process to end by itself (clean runs); kill and fail those that do not."""
        deadline = time.monotonic() + timeout
        for slot in self.slots.values():
            if slot.process is None:
                continue
            try:
                slot.process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.failures.append(f"{slot.journals[-1].name} did not finish within {timeout} s")
        self.kill_all()

    def raise_failures(self) -> None:
        self._reap()
        if self.failures:
            raise AssertionError("role processes failed:\n" + "\n".join(self.failures))
