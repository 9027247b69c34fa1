"""Encryption at rest: AES-256-GCM under data keys wrapped by the keyring's master keys; nothing of an
encrypted message in plaintext on disk; clear errors and nothing lost without the key; rotation;
metadata, stats and same-key moves without the key; re-sealing on moves between keys."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq import limits
from durableq.ops.queue_rows import Catalog
from durableq.types import md5_hex

from .conftest import FakeClock, payload_dir, sql_rows, sql_run

SECRET_BODY = "card 4111-1111-1111-1111 for order 77"
SECRET_VALUE = "Jane Q. Secretname"
SECRET_PAYLOAD = "payload-needle-" * 20_000  # 300,000 bytes: stored outside


@pytest.fixture
def keyring(tmp_path: Path) -> durableq.Keyring:
    ring = durableq.Keyring(tmp_path / "keys.json")
    ring.create("orders")
    return ring


@pytest.fixture
def sealed(target: str, db_path: Path, clock: FakeClock, keyring: durableq.Keyring) -> durableq.Broker:
    broker = durableq.open(
        target, clock=clock, durability="normal", keyring=keyring, payload_dir=payload_dir(target, db_path)
    )
    yield broker  # type: ignore[misc]
    broker.close()


def another(broker: durableq.Broker, clock: FakeClock, **options: Any) -> durableq.Broker:
    """Another broker on ``broker``'s database and payload store (without a keyring unless given one)."""
    return durableq.open(
        broker.location, clock=clock, durability="normal", payload_dir=broker.payload_dir, **options
    )


def data_key_versions(target: str) -> dict[str, tuple[str, int]]:
    """message id -> (alias, version) of its data key."""
    rows = sql_rows(
        target,
        "SELECT m.message_id, d.alias, d.version FROM durableq_messages m "
        "JOIN durableq_data_keys d ON d.id = m.data_key_id",
    )
    return {message_id: (alias, version) for message_id, alias, version in rows}


def test_the_keyring_file(tmp_path: Path) -> None:
    ring = durableq.Keyring(tmp_path / "keys.json")
    info = ring.create("alias/orders")
    assert (info.alias, info.current_version, info.versions) == ("orders", 1, 1)
    assert (os.stat(ring.path).st_mode & 0o777) == limits.KEYRING_FILE_MODE
    with pytest.raises(durableq.InvalidParameterValue, match="exists"):
        ring.create("orders")
    with pytest.raises(durableq.InvalidParameterValue, match="not allowed"):
        ring.create("bad alias!")
    rotated = ring.rotate("orders")
    assert (rotated.current_version, rotated.versions, rotated.key_id) == (2, 2, info.key_id)
    assert [k.alias for k in durableq.Keyring(ring.path).list()] == ["orders"]  # another reader sees it
    with pytest.raises(durableq.KmsNotFound):
        ring.rotate("missing")
    os.chmod(ring.path, 0o644)
    with pytest.raises(durableq.KmsAccessDenied, match="chmod 600"):
        durableq.Keyring(ring.path).list()


def test_round_trip_with_plaintext_digests(sealed: durableq.Broker) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders")
    sent = queue.send(SECRET_BODY, attributes={"customer": SECRET_VALUE, "blob": b"\x00\x01"})
    assert sent.md5_of_body == md5_hex(SECRET_BODY)  # over the plaintext, as SQS computes it
    (message,) = queue.receive()
    assert message.body == SECRET_BODY and message.md5_of_body == sent.md5_of_body
    assert message.attributes == {
        "customer": durableq.Attribute("String", SECRET_VALUE),
        "blob": durableq.Attribute("Binary", b"\x00\x01"),
    }
    (peeked,) = queue.peek()
    assert peeked.encrypted and peeked.body == SECRET_BODY  # this broker holds the key


def test_nothing_of_an_encrypted_message_is_on_disk_in_plaintext(
    tmp_path: Path, keyring: durableq.Keyring
) -> None:
    db = tmp_path / "raw.db"
    with durableq.open(db, keyring=keyring) as broker:  # durability "full": every commit in the WAL
        queue = broker.create_queue("orders", kms_master_key_id="alias/orders", large_payloads=True)
        queue.send(SECRET_BODY, attributes={"customer": SECRET_VALUE})
        queue.send(SECRET_PAYLOAD, attributes={"customer": SECRET_VALUE})
        fifo = broker.create_queue("orders.fifo", fifo=True, sqs_managed_sse_enabled=True)
        fifo.send(SECRET_BODY + " fifo", group_id="g", deduplication_id="d1")
        files = [db, Path(f"{db}-wal"), *broker.payload_dir.rglob("*")]
        raw = b"".join(f.read_bytes() for f in files if f.is_file())
        assert Path(f"{db}-wal").stat().st_size > 0  # the commits are (also) in the WAL, searched too
        for secret in (SECRET_BODY, SECRET_VALUE, SECRET_PAYLOAD[:40]):
            assert secret.encode() not in raw, secret
        # The control: the same search finds plaintext messages.
        broker.create_queue("plain").send(SECRET_BODY, attributes={"customer": SECRET_VALUE})
        raw = b"".join(f.read_bytes() for f in files if f.is_file())
        assert SECRET_BODY.encode() in raw and SECRET_VALUE.encode() in raw
        got = {m.body for m in queue.receive(10)}
        assert got == {SECRET_BODY, SECRET_PAYLOAD}
        assert fifo.receive()[0].body == SECRET_BODY + " fifo"
    assert [k.alias for k in keyring.list()] == ["aws/sqs", "orders"]  # the managed key, made on use


def test_without_the_key_nothing_is_read_and_nothing_is_lost(
    clock: FakeClock, sealed: durableq.Broker
) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders")
    sent = queue.send(SECRET_BODY)
    with another(sealed, clock) as keyless:
        blind = keyless.get_queue("orders")
        with pytest.raises(durableq.KmsAccessDenied, match="without a keyring"):
            blind.receive()
        with pytest.raises(durableq.KmsAccessDenied, match="without a keyring"):
            blind.send("more")
        # Metadata needs no key.
        assert blind.stats().approximate_number_of_messages == 1
        (peeked,) = blind.peek()
        assert (peeked.message_id, peeked.body, peeked.attributes) == (sent.message_id, None, {})
        assert peeked.encrypted and peeked.receive_count == 0 and peeked.state == "visible"
    (message,) = queue.receive()  # untouched: received once, by the broker with the key
    assert message.body == SECRET_BODY and message.receive_count == 1


def test_a_stale_cached_queue_row_never_claims_what_it_cannot_open(
    clock: FakeClock, sealed: durableq.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A keyless broker caches "orders" while it encrypts nothing; then the queue starts to encrypt.
    # However long its cache trusts the old row, its one-statement receive must not claim a sealed
    # row (it could not give it back): it takes the transaction path, and the message stays visible.
    monkeypatch.setattr(Catalog, "REVALIDATE_EVERY", 3600.0)
    queue = sealed.create_queue("orders")
    with another(sealed, clock) as keyless:
        blind = keyless.get_queue("orders")
        assert blind.receive() == []  # caches the plaintext row
        queue.set_attributes(kms_master_key_id="alias/orders")
        queue.send(SECRET_BODY)
        with pytest.raises(durableq.KmsAccessDenied):
            blind.receive()
    assert queue.stats().approximate_number_of_messages == 1
    assert queue.receive()[0].body == SECRET_BODY


def test_a_wrong_key_or_a_missing_alias_is_a_clear_error(
    clock: FakeClock, sealed: durableq.Broker, tmp_path: Path
) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders")
    queue.send(SECRET_BODY)
    impostor = durableq.Keyring(tmp_path / "other.json")
    impostor.create("orders")  # the same alias, other key material
    with another(sealed, clock, keyring=impostor) as wrong:
        # The message's trouble as far as this broker can tell: handed out flagged (test_undecryptable.py).
        (flagged,) = wrong.get_queue("orders").receive(visibility_timeout=0)
        assert isinstance(flagged.unreadable, durableq.KmsAccessDenied)
        assert "not the key the message was encrypted with" in flagged.unreadable.message
        with pytest.raises(durableq.KmsAccessDenied, match="not the key the message was encrypted with"):
            flagged.body  # noqa: B018 - the property raises
    (message,) = queue.receive()
    assert (message.body, message.receive_count) == (SECRET_BODY, 2)
    missing = sealed.create_queue("elsewhere", kms_master_key_id="alias/nothing-here")
    with pytest.raises(durableq.KmsNotFound, match="no key alias/nothing-here"):
        missing.send("x")
    assert missing.stats().approximate_number_of_messages == 0


def test_rotation_keeps_old_messages_readable(
    target: str, clock: FakeClock, sealed: durableq.Broker, keyring: durableq.Keyring
) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders")
    old = queue.send("before rotation")
    keyring.rotate("orders")
    new = queue.send("after rotation")
    versions = data_key_versions(target)
    assert versions[old.message_id] == ("orders", 1) and versions[new.message_id] == ("orders", 2)
    received = queue.receive(10, visibility_timeout=0)
    assert sorted(m.body for m in received) == ["after rotation", "before rotation"]
    # A keyring without version 1 cannot read what version 1 wrapped.
    document = json.loads(keyring.path.read_text())
    del document["keys"]["orders"]["versions"]["1"]
    keyring.path.write_text(json.dumps(document))
    with another(sealed, clock, keyring=keyring.path) as broker:
        partial = broker.get_queue("orders")
        bodies = {m.message_id: m.body for m in partial.peek()}
        assert bodies == {old.message_id: None, new.message_id: "after rotation"}
        received = {m.message_id: m for m in partial.receive(10)}
        assert received[new.message_id].body == "after rotation"
        with pytest.raises(durableq.KmsNotFound, match="no version 1 of key alias/orders"):
            received[old.message_id].body  # noqa: B018 - the property raises


def test_a_data_key_serves_its_reuse_period(target: str, sealed: durableq.Broker, clock: FakeClock) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders", kms_data_key_reuse_period=60)
    first, second = queue.send("a"), queue.send("b")
    clock.advance(61)
    third = queue.send("c")
    keys = dict(sql_rows(target, "SELECT message_id, data_key_id FROM durableq_messages"))
    assert keys[first.message_id] == keys[second.message_id] != keys[third.message_id]


def test_brokers_share_a_stored_data_key_within_its_reuse_period(
    target: str, sealed: durableq.Broker, clock: FakeClock, keyring: durableq.Keyring
) -> None:
    # Each short-lived process (a CLI call, say) takes the data key another stored, rather than adding
    # one of its own: data_keys grows by about one row per reuse period, not one per process.
    sealed.create_queue("orders", kms_master_key_id="alias/orders", kms_data_key_reuse_period=60)
    for body in ("a", "b", "c"):
        with another(sealed, clock, keyring=keyring) as broker:
            broker.get_queue("orders").send(body)
        clock.advance(10)
    clock.advance(60)
    with another(sealed, clock, keyring=keyring) as broker:
        broker.get_queue("orders").send("d")
    key_of = dict(sql_rows(target, "SELECT message_id, data_key_id FROM durableq_messages ORDER BY id"))
    [(stored,)] = sql_rows(target, "SELECT count(*) FROM durableq_data_keys")
    first, *rest, last = key_of.values()
    assert rest == [first, first] and last != first and stored == 2
    assert sorted(m.body for m in sealed.get_queue("orders").receive(10)) == ["a", "b", "c", "d"]


def test_ciphertext_moved_to_another_row_fails_to_authenticate(target: str, sealed: durableq.Broker) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders")
    a, b = queue.send("message a"), queue.send("message b")
    bodies = dict(
        sql_rows(target, "SELECT message_id, body FROM durableq_messages")
    )  # b's ciphertext into a's row
    moved = sql_run(
        target,
        "UPDATE durableq_messages SET body = ? WHERE message_id = ?",
        bodies[b.message_id],
        a.message_id,
    )
    assert moved == 1
    received = {m.message_id: m for m in queue.receive(10)}
    with pytest.raises(durableq.MessageCorrupt, match="does not authenticate"):
        received[a.message_id].body  # noqa: B018 - the property raises
    assert received[b.message_id].body == "message b"  # the other one is unharmed
    queue.delete(received[a.message_id].receipt_handle)  # and the damaged one can be deleted
    assert queue.stats().approximate_number_of_messages_not_visible == 1


@pytest.mark.parametrize("dlq_key", ["alias/orders", None], ids=["same-key-dlq", "plaintext-dlq"])
def test_redrive_needs_no_key(clock: FakeClock, sealed: durableq.Broker, dlq_key: str | None) -> None:
    sealed.create_queue("orders-dlq", **({"kms_master_key_id": dlq_key} if dlq_key else {}))
    orders = sealed.create_queue(
        "orders",
        kms_master_key_id="alias/orders",
        redrive_policy=durableq.RedrivePolicy("orders-dlq", max_receive_count=1),
    )
    sent = orders.send(SECRET_BODY)
    orders.receive(visibility_timeout=0)
    assert orders.receive() == []  # moved to the dead-letter queue
    with another(sealed, clock) as keyless:
        task = keyless.start_message_move("orders-dlq")
        keyless.wait_for_message_move(task.task_handle, timeout=30)
        (done,) = keyless.list_message_moves("orders-dlq")
        assert (done.status, done.moved) == ("COMPLETED", 1)
    (back,) = orders.receive()
    assert (back.message_id, back.body) == (sent.message_id, SECRET_BODY)


def test_moves_between_keys_reseal_in_the_same_transaction(
    target: str, clock: FakeClock, sealed: durableq.Broker, keyring: durableq.Keyring
) -> None:
    keyring.create("archive")
    sealed.create_queue("archive-dlq", kms_master_key_id="alias/archive")
    sealed.create_queue("plain-dlq")
    to_archive = sealed.create_queue(
        "to-archive",
        kms_master_key_id="alias/orders",
        large_payloads=True,
        redrive_policy=durableq.RedrivePolicy("archive-dlq", max_receive_count=1),
    )
    to_plain = sealed.create_queue(
        "to-plain",
        kms_master_key_id="alias/orders",
        redrive_policy=durableq.RedrivePolicy("plain-dlq", max_receive_count=1),
    )
    archived = to_archive.send(SECRET_PAYLOAD, attributes={"customer": SECRET_VALUE})
    plain = to_plain.send(SECRET_BODY)
    for queue in (to_archive, to_plain):
        queue.receive(visibility_timeout=0)
        assert queue.receive() == []
    assert data_key_versions(target)[archived.message_id] == ("archive", 1)
    # A move never decrypts: in a queue that does not encrypt, the message stays under its own key,
    # and that queue's receives open it with the key from then on.
    assert data_key_versions(target)[plain.message_id] == ("orders", 1)
    (moved,) = sealed.get_queue("archive-dlq").receive()
    assert moved.body == SECRET_PAYLOAD and moved.attributes["customer"].value == SECRET_VALUE
    with another(sealed, clock) as keyless:  # without a keyring: that one message is flagged
        (flagged,) = keyless.get_queue("plain-dlq").receive(visibility_timeout=0)
        assert isinstance(flagged.unreadable, durableq.KmsAccessDenied)
        assert keyless.get_queue("plain-dlq").stats().approximate_number_of_messages == 1
    assert sealed.get_queue("plain-dlq").receive()[0].body == SECRET_BODY
    # Without the target's key, a move that must reseal fails whole: nothing moves.
    sealed.create_queue("locked-dlq", kms_master_key_id="alias/not-in-keyring")
    locked = sealed.create_queue(
        "locked",
        kms_master_key_id="alias/orders",
        redrive_policy=durableq.RedrivePolicy("locked-dlq", max_receive_count=1),
    )
    locked.send("stays")
    locked.receive(visibility_timeout=0)
    with pytest.raises(durableq.KmsNotFound):
        locked.receive()
    assert locked.stats().approximate_number_of_messages == 1


def test_turning_encryption_off_keeps_old_messages_readable(sealed: durableq.Broker) -> None:
    queue = sealed.create_queue("orders", kms_master_key_id="alias/orders")
    queue.send("sealed")
    queue.set_attributes(kms_master_key_id=None)
    queue.send("plain")
    assert sorted(m.body for m in queue.receive(10)) == ["plain", "sealed"]
    (peeked,) = [p for p in queue.peek() if p.body == "plain"]
    assert not peeked.encrypted


def test_fifo_encrypted_with_attempt_replay(sealed: durableq.Broker) -> None:
    fifo = sealed.create_queue("orders.fifo", fifo=True, kms_master_key_id="alias/orders")
    fifo.send("first", group_id="g", deduplication_id="1", attributes={"n": 1})
    fifo.send("second", group_id="g", deduplication_id="2")
    batch = fifo.receive(10, attempt_id="a1")
    again = fifo.receive(10, attempt_id="a1")
    assert [m.body for m in batch] == [m.body for m in again] == ["first", "second"]
    assert batch[0].attributes == {"n": durableq.Attribute("Number", "1")}
