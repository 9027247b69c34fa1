"""Builds a file with five minutes of queue activity (on a simulated clock) and analyses it.

    python examples/analytics_demo.py [DB] [PLOT.png]

`orders` gets more work each minute and a quarter of its messages always fail
(three receives, then the dead-letter queue); `emails` keeps a few in flight
and some delayed.  Needs the Spark extra (see README, "Spark analytics").
"""

from __future__ import annotations

import sys
from pathlib import Path

import durableq
from durableq import RedrivePolicy, SendEntry


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 1_795_165_200.0  # 2026-11-20 09:00 UTC

    def __call__(self) -> float:
        return self.now


def build(path: Path, clock: SimulatedClock) -> None:
    with durableq.open(path, clock=clock, durability="normal") as broker:
        broker.create_queue("orders-dlq")
        orders = broker.create_queue(
            "orders", visibility_timeout=20, redrive_policy=RedrivePolicy("orders-dlq", 3)
        )
        emails = broker.create_queue("emails")
        for minute in range(5):
            for second in range(0, 60, 5):
                batch = 4 + minute * 2
                orders.send_batch(
                    [SendEntry(str(i), f"order {minute}:{second}:{i}") for i in range(batch // 2)]
                )
                orders.send_batch(
                    [SendEntry(str(i), f"order {minute}:{second}:{i}b") for i in range(batch - batch // 2)]
                )
                emails.send_batch([SendEntry(str(i), f"email {minute}:{second}:{i}") for i in range(3)])
                for message in orders.receive(10):
                    if int(message.message_id[:8], 16) % 4:  # three in four succeed
                        orders.delete(message.receipt_handle)
                for message in emails.receive(3):
                    emails.delete(message.receipt_handle)
                clock.now += 5
        emails.send_batch([SendEntry(str(i), f"later {i}", delay_seconds=600) for i in range(10)])
        emails.receive(10)  # a few in flight at the snapshot


def main(path: str = "analytics-demo.db", plot: str = "analytics-activity.png") -> None:
    from durableq.analytics import run_report

    file = Path(path)
    for stale in file.parent.glob(file.name + "*"):
        stale.unlink()
    clock = SimulatedClock()
    build(file, clock)
    result = run_report(file, "all", plot=plot, clock=clock)
    for name, rows in result.items():
        print(f"\n{name}")
        for row in rows:
            print("  ", {k: (f"{v:%H:%M}" if hasattr(v, "hour") else v) for k, v in row.items()})
    print(f"\nplot: {plot}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
