"""Closing a broker while other threads use it: they get ``BrokerClosed`` (or another durableq error),
never a crash of the process, and what was acknowledged stays."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Rounds of: six threads sending (and receiving) on one broker; the main thread closes it under them.
_SCRIPT = textwrap.dedent(
    """
    import sqlite3, sys, threading, time
    import durableq

    path, durability, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for round in range(rounds):
        file = f"{path}.{round}"
        broker = durableq.open(file, durability=durability)
        queue = broker.create_queue("jobs")
        acked, raw, lock = [], [], threading.Lock()

        def use(index):
            n = 0
            while True:
                body = f"{index}-{n}"
                n += 1
                try:
                    queue.send(body)
                    with lock:
                        acked.append(body)
                    if n % 4 == 0:
                        queue.receive(visibility_timeout=0)
                except durableq.DurableQError as exc:
                    if isinstance(exc, durableq.BrokerClosed):
                        return
                except BaseException as exc:
                    raw.append(repr(exc))
                    return

        threads = [threading.Thread(target=use, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        while len(acked) < 200:
            time.sleep(0.001)
        broker.close()
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive(), "a thread hangs after the close"
        assert not raw, raw
        conn = sqlite3.connect(file)
        stored = {body for (body,) in conn.execute("SELECT body FROM durableq_messages")}
        conn.close()
        assert set(acked) <= stored, "acknowledged sends are missing"
    print("ok")
    """
)


def test_closing_a_broker_while_threads_send_does_not_crash_the_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "queue.db"), "normal", "20"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-3000:])


def test_closing_a_broker_while_threads_send_at_full_durability(tmp_path: Path) -> None:
    """With group commit the writes wait at the gate, not on their own connections (this held)."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "queue.db"), "full", "5"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-3000:])


#: Daemon threads that send until the process exits (the main thread just returns).
_EXIT_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import durableq

    broker = durableq.open(sys.argv[1], durability=sys.argv[2])
    queue = broker.create_queue("jobs")
    sent = []

    def send():
        while True:
            queue.send("x")
            sent.append(1)

    for _ in range(4):
        threading.Thread(target=send, daemon=True).start()
    while len(sent) < 200:
        time.sleep(0.001)
    """
)


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_process_whose_daemon_threads_send_exits_cleanly(tmp_path: Path, durability: str) -> None:
    for attempt in range(20):  # it crashes in about a third of the exits
        done = subprocess.run(
            [sys.executable, "-c", _EXIT_SCRIPT, str(tmp_path / f"queue{attempt}.db"), durability],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (attempt, done.returncode, done.stderr[-3000:])
