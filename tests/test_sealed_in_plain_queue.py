"""A plaintext queue that received sealed messages (a redrive from an encrypted queue to a plaintext
dead-letter queue, or a move) is still a plaintext queue: a consumer without a keyring receives its
plain messages, and the sealed ones handed out flagged (README, Guarantees: "undecryptable messages
never wedge a queue")."""

from __future__ import annotations

from pathlib import Path

import durableq
from durableq import RedrivePolicy

from .conftest import FakeClock, payload_dir


def test_a_plaintext_dead_letter_queue_stays_readable_without_a_keyring(
    target: str, db_path: Path, clock: FakeClock, tmp_path: Path
) -> None:
    keys = tmp_path / "keys.json"
    durableq.Keyring(keys).create("orders")
    store = payload_dir(target, db_path)
    with durableq.open(target, clock=clock, durability="normal", keyring=keys, payload_dir=store) as keyed:
        keyed.create_queue("dead")
        orders = keyed.create_queue(
            "orders", kms_master_key_id="alias/orders", redrive_policy=RedrivePolicy("dead", 1)
        )
        orders.send("secret order")
        assert [m.body for m in orders.receive(visibility_timeout=0)] == ["secret order"]
        assert orders.receive() == []  # its second receive moved it to the plaintext queue, sealed
    with durableq.open(target, clock=clock, durability="normal", payload_dir=store) as plain:
        dead = plain.get_queue("dead")
        dead.send("plain note")
        received = dead.receive(10)
        readable = [m.body for m in received if m.unreadable is None]
        flagged = [m.unreadable for m in received if m.unreadable is not None]
        assert readable == ["plain note"]
        assert len(flagged) == 1 and isinstance(flagged[0], durableq.KmsAccessDenied), flagged
