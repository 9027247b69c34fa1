"""Traffic on queues that keep history, through the library, on a fake clock; and what
``Queue.events()`` says about it, in plain Python (the expected values of the history tests)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import durableq
from durableq import RedrivePolicy
from tests.conftest import FakeClock

from .scenario import START, send

#: Queues with history, and one without (it must produce no rows).
HISTORY_QUEUES = ("jobs", "jobs-dlq")
PLAIN = "plain"


def create(path: Path, clock: FakeClock) -> None:
    with durableq.open(path, clock=clock, durability="normal") as broker:
        broker.create_queue("jobs-dlq", history=True)
        broker.create_queue("jobs", history=True, redrive_policy=RedrivePolicy("jobs-dlq", 2))
        broker.create_queue(PLAIN)


def traffic(path: Path, clock: FakeClock, round_: int) -> None:
    """One round: 60 jobs sent over a minute; most deleted after one receive, some after a retry,
    some dead-lettered after two; the dead letters partly deleted there. Times vary per message."""
    with durableq.open(path, clock=clock, durability="normal") as broker:
        jobs, dlq, plain = (broker.get_queue(n) for n in ("jobs", "jobs-dlq", PLAIN))
        for second in range(6):
            send(jobs, 10, f"-{round_}-{second}")
            send(plain, 10, f"-{round_}-{second}")
            clock.advance(7 + second)
        for attempt in range(3):
            for batch in range(6):
                for n, message in enumerate(jobs.receive(10, visibility_timeout=30)):
                    clock.advance(0.25 * (n % 4))
                    # "...-<n>-" bodies: a third fail the first time, a sixth always.
                    number = int(message.body.split("-")[3])
                    if number % 6 == 0 or (number % 3 == 0 and attempt == 0):
                        continue
                    jobs.delete(message.receipt_handle)
                clock.advance(3 + batch)
            clock.advance(31)  # the failed ones become visible again
        jobs.receive(10)  # moves what was received twice to the dead-letter queue
        for message in dlq.receive(10, visibility_timeout=60)[:5]:
            clock.advance(2)
            dlq.delete(message.receipt_handle)
        for message in plain.receive(10):
            plain.delete(message.receipt_handle)
        clock.advance(60)


def build(path: Path, rounds: int = 2) -> FakeClock:
    clock = FakeClock(START)
    create(path, clock)
    for round_ in range(rounds):
        traffic(path, clock, round_)
    return clock


def library_events(path: Path, clock: FakeClock) -> list[durableq.MessageEvent]:
    """Every message event of the file, as the library reports them, by event id."""
    with durableq.open(path, clock=clock, durability="normal") as broker:
        found = [e for name in broker.list_queues() for e in broker.get_queue(name).events(limit=100_000)]
    return sorted(found, key=lambda e: e.event_id)


def per_message(events: list[durableq.MessageEvent]) -> dict[tuple[str, str], dict[str, list[int]]]:
    """(queue, message id) -> event name -> the epoch milliseconds of those events."""
    found: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for e in events:
        found[(e.queue, e.message_id)][e.event].append(round(e.at.timestamp() * 1000))
    return found
