"""A producer and consumer that keeps writing to a durableq file until a stop file appears.

Run as ``python -m tests.analytics.writer DB STOP``.  It prints the number of
rounds done every ``REPORT_EVERY`` rounds (the first line says it is running).
Each round is one FIFO batch of 10 (one transaction: the messages, their
sequence numbers and the queue's ``next_sequence`` together), one standard
batch, and a receive that changes rows in place.
"""

from __future__ import annotations

import sys
from pathlib import Path

import durableq
from durableq import SendEntry
from tests.conftest import FakeClock

REPORT_EVERY = 20


def main(path: Path, stop: Path) -> None:
    with durableq.open(path, clock=FakeClock(), durability="normal") as broker:
        stream = broker.create_queue("stream")
        ordered = broker.create_queue("stream.fifo", fifo=True)
        rounds = 0
        while not stop.exists():
            batch = [
                SendEntry(str(i), f"{rounds}:{i}", group_id=f"g{i % 3}", deduplication_id=f"{rounds}-{i}")
                for i in range(10)
            ]
            assert not ordered.send_batch(batch).failed
            assert not stream.send_batch([SendEntry(str(i), f"{rounds}:{i}") for i in range(10)]).failed
            stream.receive(10, visibility_timeout=0)
            rounds += 1
            if rounds % REPORT_EVERY == 0:
                print(rounds, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
