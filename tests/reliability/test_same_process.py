"""Two brokers on one file in one process must not cost a send its durability.

Found by the long run (a concurrency run lost one acknowledged batch): each
``mixed`` process opens a broker per thread.  ``durableq.open`` reads the
file's header with a file descriptor of its own; closing it releases every
POSIX lock the process holds on the file, SQLite's included
(https://www.sqlite.org/howtocorrupt.html, 2.2).  Another process closing
its last connection then believes it is alone, checkpoints and deletes the
WAL, and what the first process commits afterwards goes to the deleted file.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import durableq

from .fleet import ROOT


def _python(code: str, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, text=True, **popen)  # type: ignore[call-overload]


def test_a_second_broker_in_the_process_loses_no_acknowledged_send(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    with durableq.open(path) as setup:
        setup.create_queue("jobs")
    first = durableq.open(path)
    queue = first.get_queue("jobs")
    queue.send("before")
    second = durableq.open(path)  # another broker on the same file, as another thread of an app would open
    # Another process comes and goes; a third holds the file open until the end.
    passer = _python(f"""
        import durableq
        with durableq.open({str(path)!r}) as broker:
            broker.get_queue("jobs").send("from a process that came and went")
    """)
    assert passer.wait(60) == 0
    holder = _python(
        f"""
        import sys, durableq
        with durableq.open({str(path)!r}) as broker:
            print("holding", flush=True)
            sys.stdin.readline()
        """,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    acknowledged = queue.send("after")  # returned: committed, so it must survive
    first.close()
    second.close()
    holder.communicate("done\n", timeout=60)
    with durableq.open(path) as broker:
        stored = {m.message_id: m.body for m in broker.get_queue("jobs").peek(limit=100)}
    assert acknowledged.message_id in stored, (
        f"the acknowledged send 'after' ({acknowledged.message_id}) is lost; "
        f"the file holds {sorted(stored.values())}"
    )
