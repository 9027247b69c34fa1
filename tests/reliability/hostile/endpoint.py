"""``Server``: ``python -m durableq.server`` for a hostile run, SigV4 required, SIGKILLed and
restarted on the same port by the harness.

Each run of it journals a ``start`` (and a ``stop`` when stopped cleanly), so the checker allows
for what a killed endpoint may have done without answering (a receive it committed, counts it
never flushed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..fleet import ROOT
from ..journal import Journal
from . import layout
from .wire import KEY_ID, SECRET, WIRE_CHECKED


class Server:
    """``python -m durableq.server`` on a fixed port, started and SIGKILLed by the harness."""

    def __init__(self, place: layout.Place, folder: Path, port: int) -> None:
        self.place, self.folder, self.port = place, folder, port
        self.url = f"http://127.0.0.1:{port}"
        self.credentials = folder / "credentials"
        self.credentials.write_text(f"{KEY_ID} {SECRET}\n")
        self.process: subprocess.Popen[str] | None = None
        self.runs = 0
        self.journal: Journal | None = None

    def start(self) -> None:
        self.runs += 1
        name = f"server.{self.runs:04d}"
        self.journal = Journal(self.folder / f"{name}.jsonl")
        self.journal.write("start", role="server", pid=0, receives_from=list(WIRE_CHECKED))
        argv = [sys.executable, "-m", "durableq.server", "--db", self.place.db, "--port", str(self.port)]
        argv += ["--credentials", str(self.credentials), "--keyring", self.place.keyring]
        if self.place.payload_dir:
            argv += ["--payload-dir", self.place.payload_dir]
        for _ in range(50):  # the port may still be taken by the run just killed
            with open(self.folder / f"{name}.err", "a") as err:
                self.process = subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    start_new_session=True,
                    env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # stacks on SIGABRT, SIGSEGV
                )
            assert self.process.stdout is not None
            line = self.process.stdout.readline()
            if " at http" in line:
                return
            self.process.wait(30)
            time.sleep(0.2)
        raise AssertionError(f"the endpoint did not start: see {name}.err")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def stop(self) -> str | None:
        """Stop it as Ctrl-C would; None if it stopped cleanly, else what went wrong (with the
        stacks of its threads if it hung: it runs with PYTHONFAULTHANDLER, and gets SIGABRT)."""
        assert self.process is not None
        self.process.terminate()
        try:
            code = self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
            err = (self.folder / f"server.{self.runs:04d}.err").read_text(errors="replace")
            fatal = err.find("Fatal Python error")
            return (
                f"HANG: the endpoint did not stop within 60 s of SIGTERM; its threads:\n{err[fatal:][:4000]}"
            )
        if code != 0:
            return f"CRASH: the endpoint, stopped as Ctrl-C would, exited with {code}"
        if self.journal is not None:
            self.journal.write("stop")
        return None
