"""A durableq file with tens of thousands of messages in every state, built through the library API.

The fake clock starts in 2106: epoch seconds are past 2^32 there, so the
milliseconds stored are far beyond what a 32-bit column could hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import durableq
from durableq import RedrivePolicy, SendEntry
from tests.conftest import FakeClock

#: 2106-04-06: past 2^32 seconds, so past 2^31 in any unit.
START = 4_300_000_000.0
#: Queues with the numbers the scenario fixes for them.
PAYMENTS_SENT = 3_000
PAYMENTS_RECEIVED = 6_000  # three rounds: 3,000 + 2,000 + 1,000
PAYMENTS_MOVED = 2_000
AUDIT_EXPIRED = 2_000
AUDIT_LIVE = 1_000
QUEUE_NAMES = (
    "audit",
    "events-dlq.fifo",
    "events.fifo",
    "idle",
    "media",
    "orders",
    "orders-dlq",
    "payments",
    "payments-dlq",
    "scheduled",
    "secure",
)


@dataclass
class Scenario:
    path: Path
    clock: FakeClock
    #: Messages as receive returned them (the latest receive of each), by message id.
    received: dict[str, durableq.Message] = field(default_factory=dict)


def entries(prefix: str, count: int, **options: Any) -> Iterator[list[SendEntry]]:
    """``count`` messages in batches of 10; bodies of varied length, some of them not ASCII."""
    for start in range(0, count, 10):
        numbers = range(start, min(start + 10, count))
        yield [SendEntry(str(n - start), f"{prefix}-{n}-" + "é€x" * (n % 17), **options) for n in numbers]


def send(queue: durableq.Queue, count: int, prefix: str = "", **options: Any) -> None:
    for batch in entries(f"{queue.name}{prefix}", count, **options):
        result = queue.send_batch(batch)
        assert not result.failed, result.failed


def receive(scenario: Scenario, queue: durableq.Queue, calls: int, **options: Any) -> list[durableq.Message]:
    got: list[durableq.Message] = []
    for _ in range(calls):
        got.extend(queue.receive(10, **options))
    scenario.received.update((m.message_id, m) for m in got)
    return got


#: Messages of the encrypted queue, and payloads stored outside the rows of the large-payload queue.
SECURE_SENT = 50
MEDIA_SENT = 3


def build(path: Path) -> Scenario:
    clock = FakeClock(START)
    scenario = Scenario(path, clock)
    keyring = durableq.Keyring(path.with_name("keyring.json"))
    keyring.create("scenario")
    with durableq.open(path, clock=clock, durability="normal", keyring=keyring) as broker:
        broker.create_queue("orders-dlq")
        orders = broker.create_queue(
            "orders", visibility_timeout=120, redrive_policy=RedrivePolicy("orders-dlq", 5)
        )
        payments_dlq = broker.create_queue("payments-dlq")
        payments = broker.create_queue("payments", redrive_policy=RedrivePolicy("payments-dlq", 2))
        broker.create_queue("events-dlq.fifo", fifo=True)
        events = broker.create_queue(
            "events.fifo",
            fifo=True,
            content_based_deduplication=True,
            redrive_policy=RedrivePolicy("events-dlq.fifo", 1),
        )
        audit = broker.create_queue("audit", retention_period=60)
        scheduled = broker.create_queue("scheduled", delay_seconds=900)
        broker.create_queue("idle")
        # Encrypted at rest, and large payloads stored outside: Spark reads both without the key.
        send(broker.create_queue("secure", kms_master_key_id="alias/scenario"), SECURE_SENT)
        media = broker.create_queue("media", large_payloads=True, maximum_message_size=262_144)
        for number in range(MEDIA_SENT):
            media.send(f"frame {number} " + "x" * 300_000)

        # Minute 0: orders (a tenth delayed by 15 minutes) and audit messages that will expire.
        send(orders, 9_000)
        send(orders, 1_000, "-delayed", delay_seconds=900)
        send(audit, AUDIT_EXPIRED)
        clock.advance(60)
        # Minute 1: more orders; FIFO events in 30 groups.
        send(orders, 8_000, "-later")
        for group in range(30):
            send(events, 200, f"-{group}", group_id=f"group-{group}")
        clock.advance(60)
        # Minute 2: orders go in flight; some are deleted, some released (visible, received once).
        send(payments, PAYMENTS_SENT)
        clock.advance(30)
        taken = receive(scenario, orders, 600, visibility_timeout=3_600)
        for start in range(0, 3_000, 10):
            assert not orders.delete_batch([m.receipt_handle for m in taken[start : start + 10]]).failed
        for start in range(3_000, 4_000, 10):
            assert not orders.change_visibility_batch(
                [(m.receipt_handle, 0) for m in taken[start : start + 10]]
            ).failed
        clock.advance(60)
        # Minute 3: payments are received three times; the last round moves 2,000 to payments-dlq.
        receive(scenario, payments, PAYMENTS_SENT // 10, visibility_timeout=0)
        clock.advance(1)
        receive(scenario, payments, 200, visibility_timeout=0)
        clock.advance(1)
        receive(scenario, payments, 100, visibility_timeout=3_600)
        assert payments.receive(10) == []  # moves every message received twice, returns none
        held = receive(scenario, payments_dlq, 50, visibility_timeout=3_600)
        for start in range(0, 200, 10):
            assert not payments_dlq.delete_batch([m.receipt_handle for m in held[start : start + 10]]).failed
        clock.advance(60)
        # Minute 4: FIFO events received once and released, then dead-lettered on the next receive.
        receive(scenario, events, 40, visibility_timeout=0)
        clock.advance(1)
        receive(scenario, events, 40, visibility_timeout=3_600)
        clock.advance(60)
        # Minute 5: delayed messages, and audit messages still within their retention.
        send(scheduled, 2_000)
        send(audit, AUDIT_LIVE, "-live")
        clock.advance(5)
    return scenario
