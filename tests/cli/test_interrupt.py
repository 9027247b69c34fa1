"""Ctrl-C (SIGINT) during a command: exit status 130 and one line, as a shell expects of an
interrupted program; never click's "Aborted!" with status 1 (which means "refused")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import durableq
from tests.cli.test_executable import _executable
from tests.conftest import until


def _watches_the_file(pid: int) -> bool:
    """Whether the process holds an inotify descriptor: its long poll watches the database's WAL
    (durableq.engines.change_sources), so it is inside the command, waiting."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        links = [os.readlink(folder / fd) for fd in os.listdir(folder)]
    except OSError:  # the process ended, or a descriptor closed while listed
        return False
    return "anon_inode:inotify" in links


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="sees the long poll through /proc and inotify"
)
def test_ctrl_c_during_a_long_poll_exits_130_with_one_line(db: Path) -> None:
    with durableq.open(db) as broker:
        broker.create_queue("scans")
    receive = subprocess.Popen(
        [_executable(), "--db", str(db), "receive", "scans", "--wait", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: _watches_the_file(receive.pid) or receive.poll() is not None, "the receive waits")
        assert receive.poll() is None, receive.communicate()
        receive.send_signal(signal.SIGINT)
        out, err = receive.communicate(timeout=30)
    finally:
        if receive.poll() is None:
            receive.kill()
            receive.wait()
    assert receive.returncode == 130
    assert out == ""
    assert err == "error: Interrupted: stopped by Ctrl-C (SIGINT)\n"
