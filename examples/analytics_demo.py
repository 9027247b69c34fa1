"""Builds a file with five minutes of queue activity (on a simulated clock) and analyses it.

    python examples/analytics_demo.py [DB] [PLOT.png]

`orders` gets more work each minute and every fourth order always fails
(three receives, then the dead-letter queue); `emails` keeps a few in flight
and some delayed.  The clock and the failures are fixed, so every run prints
the same reports (the README shows them).  Needs the Spark extra (see README, "Spark analytics").
"""

from __future__ import annotations

import sys
from datetime import datetime
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
        sent = 0
        for minute in range(5):
            for second in range(0, 60, 5):
                batch = 4 + minute * 2
                for half in (batch // 2, batch - batch // 2):  # a batch holds at most 10
                    orders.send_batch([SendEntry(str(i), f"order {sent + i}") for i in range(half)])
                    sent += half
                emails.send_batch([SendEntry(str(i), f"email {minute}:{second}:{i}") for i in range(3)])
                for message in orders.receive(10):
                    if int(message.body.split()[1]) % 4 != 3:  # every fourth order always fails
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
        print(_table([{k: _cell(v) for k, v in row.items()} for row in rows]))
    print(f"\nplot: {plot}")


def _cell(value: object) -> str:
    if isinstance(value, datetime):
        return f"{value:%H:%M}"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value % 1 else f"{value:.1f}"
    return "-" if value is None else str(value)


def _table(rows: list[dict[str, str]]) -> str:
    """The rows as an aligned text table (numbers to the right)."""
    if not rows:
        return "(no rows)"
    headers = list(rows[0])
    widths = {h: max(len(h), *(len(row[h]) for row in rows)) for h in headers}
    numeric = {h: all(row[h].replace(".", "").replace("-", "").isdigit() for row in rows) for h in headers}

    def line(cells: dict[str, str]) -> str:
        return "  ".join(
            cells[h].rjust(widths[h]) if numeric[h] else cells[h].ljust(widths[h]) for h in headers
        ).rstrip()

    return "\n".join([line({h: h for h in headers}), *(line(row) for row in rows)])


if __name__ == "__main__":
    main(*sys.argv[1:3])
