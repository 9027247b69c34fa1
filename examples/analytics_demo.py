"""Builds a durableq file holding a day of queue traffic, for the Spark analytics to look at.

    python examples/analytics_demo.py [DB] [--hours 24]

The day runs on a simulated clock that ends at the current time, so
``durableq --db DB analyze`` right after sees it as a live file would look.
Hours below count from the start of the day (24 hours ago); the traffic is the
same whatever the time of day you run it:

- ``orders``: 20 to 120 orders a minute, peaking at hour 18; workers take
  90 a minute from hour 8 to hour 20 and 30 otherwise, so a backlog builds
  up.  One order in ten always fails: after three receives it goes to
  ``orders-dlq``.  At hour 17 an operator moves the dead letters back (a
  message move task); they fail again.
- ``emails``: 15 a minute, sent on at once; some are delayed by five minutes.
- ``reports.fifo``: a batch of 50 every hour in 5 groups, worked off slowly.
- ``audit``: 5 a minute, never read, kept for an hour (they expire).

``orders``, ``orders-dlq`` and ``emails`` keep their message history.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import durableq
from durableq import RedrivePolicy, SendEntry

#: Each simulated minute is worked in ticks of this many seconds.
TICK = 15
TICKS_PER_MINUTE = 60 // TICK


class SimulatedClock:
    """A broker clock the script moves forward by hand."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def orders_per_minute(hour: float) -> int:
    """20 at night, up to 120 at hour 18."""
    return round(20 + 100 * math.exp(-(((hour - 18) / 3) ** 2)))


def workers_per_minute(hour: float) -> int:
    return 90 if 8 <= hour < 20 else 30


def send(queue: durableq.Queue, bodies: list[str], **options: object) -> None:
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        result = queue.send_batch([SendEntry(str(i), body, **options) for i, body in enumerate(chunk)])
        assert not result.failed, result.failed


def work(queue: durableq.Queue, capacity: int, *, visibility_timeout: int = 30) -> None:
    """Receive up to ``capacity`` messages; delete those that succeed (a failing one says "fail")."""
    while capacity > 0:
        messages = queue.receive(min(10, capacity), visibility_timeout=visibility_timeout)
        if not messages:
            return
        capacity -= len(messages)
        done = [m.receipt_handle for m in messages if "fail" not in m.body]
        if done:
            assert not queue.delete_batch(done).failed


def build(path: Path, hours: int, end: float) -> None:
    """Write ``hours`` of traffic ending at ``end`` (epoch seconds) into a new file at ``path``."""
    for stale in path.parent.glob(path.name + "*"):
        stale.unlink()
    minutes = hours * 60
    start = end - end % 60 - minutes * 60
    clock = SimulatedClock(start)
    with durableq.open(path, clock=clock, durability="normal") as broker:
        # Message history (Queue.events) for the latency, processing and retries reports.
        broker.create_queue("orders-dlq", history=True)
        orders = broker.create_queue("orders", redrive_policy=RedrivePolicy("orders-dlq", 3), history=True)
        emails = broker.create_queue("emails", history=True)
        reports = broker.create_queue("reports.fifo", fifo=True, content_based_deduplication=True)
        audit = broker.create_queue("audit", retention_period=3_600)
        sent = 0
        for minute in range(minutes):
            hour = (minute / 60) % 24
            if minute == 17 * 60:
                task = broker.start_message_move("orders-dlq")
                broker.wait_for_message_move(task.task_handle)
            if minute % 60 == 0:
                for group in range(5):
                    send(
                        reports, [f"report {minute}-{group}-{n}" for n in range(10)], group_id=f"team-{group}"
                    )
            for _ in range(TICKS_PER_MINUTE):
                count = orders_per_minute(hour) // TICKS_PER_MINUTE
                bodies = [
                    f"order {sent + n}" + (" fail" if (sent + n) % 10 == 0 else "") for n in range(count)
                ]
                sent += count
                send(orders, bodies)
                send(emails, [f"email {minute}-{n}" for n in range(3)])
                if minute % 30 == 0:
                    send(emails, [f"reminder {minute}"], delay_seconds=300)
                send(audit, [f"audit {minute}"])
                work(orders, workers_per_minute(hour) // TICKS_PER_MINUTE)
                work(emails, 10)
                work(reports, 1, visibility_timeout=600)
                clock.now += TICK


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", nargs="?", default="demo.db", help="the file to write (replaced if it exists)")
    parser.add_argument("--hours", type=int, default=24, help="how many hours of traffic (default 24)")
    args = parser.parse_args()
    path = Path(args.db)
    build(path, args.hours, time.time())
    print(f"wrote {path}: {args.hours} hours of traffic up to now")


if __name__ == "__main__":
    main()
