"""A forked child's writes must survive whatever the other processes on the file do.

SQLite keeps, per process, a table of the locks the process holds on each file, shared by all its
connections: a connection that finds the file's SHARED lock held by another connection of the same
process takes no lock of its own from the operating system (nor the ``-shm`` file's "dead man
switch" lock).  A forked child inherits its parent's table, but not the parent's POSIX locks.  If the
child keeps its copies of the parent's connections unclosed, its own connections believe the lock is
held and take none: to every other process the file looks unused by the child.  The last process to
close the file then takes its exclusive lock, checkpoints what it can, and deletes the WAL under
the child, whose later commits go to an unlinked file and are lost.
"""

from __future__ import annotations

import faulthandler
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import durableq


def _bodies(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {body for (body,) in conn.execute("SELECT body FROM durableq_messages")}
    finally:
        conn.close()


def _child(queue: durableq.Queue, go: int, done: int, before: str, after: list[str]) -> None:
    """In the child: send ``before`` (opening connections of its own), say so on ``done``, wait for
    ``go``, send ``after``, say so again.  Exits, never returns."""
    code = 1
    try:
        faulthandler.dump_traceback_later(60, exit=True)
        queue.send(before)
        os.write(done, b"1")
        os.read(go, 1)
        for body in after:
            queue.send(body)  # each one returned: acknowledged
        os.write(done, b"2")
        code = 0
    finally:
        os._exit(code)


def test_a_childs_sends_survive_its_parent_closing_the_broker(db_path: Path) -> None:
    after = [f"child after {i}" for i in range(5)]
    broker = durableq.open(db_path)
    queue = broker.create_queue("jobs")
    queue.send("parent")
    go_read, go_write = os.pipe()
    done_read, done_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(queue, go_read, done_write, "child before", after)
    assert os.read(done_read, 1) == b"1"  # the child has sent once: it has connections of its own
    broker.close()  # the parent is done with the file (its last connection closes)
    os.write(go_write, b"1")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.read(done_read, 1) == b"2"  # every send of the child returned
    assert {"parent", "child before", *after} <= _bodies(db_path)


def test_a_childs_sends_survive_another_process_opening_and_closing_the_file(db_path: Path) -> None:
    after = [f"child after {i}" for i in range(5)]
    go_read, go_write = os.pipe()
    done_read, done_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the parent of the worker: opens the broker, forks the worker, and exits
        code = 1
        try:
            broker = durableq.open(db_path)
            queue = broker.create_queue("jobs")
            if os.fork() == 0:
                _child(queue, go_read, done_write, "child before", after)
            code = 0
        finally:
            os._exit(code)
    os.close(done_write)  # the worker's copy is the one left
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.read(done_read, 1) == b"1"  # the worker has sent once; its parent is gone
    looked = subprocess.run(
        [str(Path(sys.executable).with_name("durableq")), "--db", str(db_path), "queue", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert looked.returncode == 0, looked.stderr
    os.write(go_write, b"1")
    assert os.read(done_read, 1) == b"2"  # every send of the worker returned
    assert {"child before", *after} <= _bodies(db_path)
