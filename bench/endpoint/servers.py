"""The servers under test, each a process of its own on 127.0.0.1: start, RSS, stop."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

#: The commit whose http.server endpoint the new one replaced.
OLD_COMMIT = "d3c9a62"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Running:
    name: str
    host: str
    port: int
    process: subprocess.Popen[bytes]

    def rss(self) -> int:
        """Resident memory of the server process and its children, bytes."""
        proc = psutil.Process(self.process.pid)
        return proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


@contextlib.contextmanager
def old_tree() -> Iterator[Path | None]:
    """A temporary worktree of the old server's commit (None when this is not a git checkout)."""
    folder = Path(tempfile.mkdtemp(prefix="durableq-old-server-"))
    target = folder / "tree"
    added = subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(target), OLD_COMMIT],
        capture_output=True,
        check=False,
    )
    if added.returncode == 0:
        # The installed package maps ``durableq.migrations`` to this checkout's migrations/, whose
        # env.py the old code cannot run: a link inside the old package finds its own first.
        (target / "durableq" / "migrations").symlink_to(Path("..") / "migrations")
    try:
        yield target if added.returncode == 0 else None
    finally:
        if added.returncode == 0:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(target)],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def start(kind: str, db: Path, old: Path | None = None) -> Iterator[Running]:
    """``kind``: "new" (durableq serve), "new:h11:asyncio" (a stack variant), "old" or "moto"."""
    port = free_port()
    env = dict(os.environ)
    cwd = None
    if kind == "old":
        if old is None:
            raise RuntimeError("the old server needs a git checkout of durableq")
        argv = [sys.executable, "-m", "durableq.server", "--db", str(db), "--port", str(port)]
        env["PYTHONPATH"] = str(old)  # its own package first; the cwd too (python -m puts it first)
        cwd = str(old)
    elif kind == "moto":
        moto = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
        argv = [moto, "-p", str(port)]
    elif kind == "new":  # as shipped
        argv = [sys.executable, "-m", "durableq.server", "--db", str(db), "--port", str(port)]
    elif kind.startswith("new:"):  # new:HTTP:LOOP, a stack variant
        _, http, loop = kind.split(":")
        argv = [sys.executable, "-m", "bench.endpoint.launch", "--db", str(db), "--port", str(port)]
        argv += ["--http", http, "--loop", loop]
        cwd = str(REPO)
    else:
        raise ValueError(kind)
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    try:
        _wait_for_port(port, process)
        yield Running(kind, "127.0.0.1", port, process)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
