"""Large payloads: stored outside the row above the queue's size limit, streamed, checked, and removed
with their message whatever removes it, in whichever process; a crash between the file and the row
leaves an orphan file, never a row without its file."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import durableq
from durableq import limits
from durableq.types import md5_hex

from .conftest import FakeClock, payload_dir, raw_connection, sql_rows, sql_run, until

BIG = 1_100_000  # over the default size limit of 1,048,576 bytes


def payload_files(broker: durableq.Broker) -> list[Path]:
    root = broker.payload_dir
    if not root.is_dir():
        return []
    return sorted(f for d in root.iterdir() if d.is_dir() and d.name != "tmp" for f in d.iterdir())


@pytest.fixture
def big(broker: durableq.Broker) -> durableq.Queue:
    return broker.create_queue("big", large_payloads=True)


def test_a_large_body_goes_to_the_store_and_comes_back_whole(
    broker: durableq.Broker, big: durableq.Queue, target: str
) -> None:
    body = "photo " + "é" * BIG  # 2,200,006 bytes of UTF-8
    sent = big.send(body, attributes={"kind": "image"})
    assert sent.md5_of_body == md5_hex(body)
    (stored,) = payload_files(broker)
    ((ref, size, inline),) = sql_rows(target, "SELECT payload_ref, payload_size, body FROM durableq_messages")
    assert (ref, size, inline) == (stored.name, len(body.encode()), "")
    (message,) = big.receive()
    assert message.payload_size == len(body.encode())
    assert message.attributes == {"kind": durableq.Attribute("String", "image")}
    assert message.md5_of_body == sent.md5_of_body  # from the row: the payload is not read for it
    assert message.body == body
    assert message.open_payload().read() == body.encode()
    big.delete(message.receipt_handle)
    assert payload_files(broker) == [] and not stored.exists()


def test_a_batch_counts_only_what_stays_in_its_rows(broker: durableq.Broker) -> None:
    # Two bodies of 700,000 bytes: 1.4 MB together, over the batch limit of 1 MiB when inline, and
    # each over the limit of a queue of 256 KiB messages, which takes them in its payload store.
    big = broker.create_queue("big", large_payloads=True, maximum_message_size=262_144)
    entries = [durableq.SendEntry(str(i), str(i) * 700_000) for i in range(2)]
    result = big.send_batch(entries)
    assert [s.id for s in result.successful] == ["0", "1"] and result.failed == []
    assert len(payload_files(broker)) == 2
    assert sorted(m.body for m in big.receive(10)) == sorted(e.body for e in entries)
    plain = broker.create_queue("plain", maximum_message_size=limits.MAX_MAXIMUM_MESSAGE_SIZE)
    with pytest.raises(durableq.BatchRequestTooLong):
        plain.send_batch(entries)
    # A batch refused whole (its attributes alone are over the limit) leaves no payload file behind.
    heavy = [durableq.SendEntry(str(i), "y" * BIG, attributes={"a": "z" * 110_000}) for i in range(10)]
    with pytest.raises(durableq.BatchRequestTooLong):
        big.send_batch(heavy)
    assert len(payload_files(broker)) == 2


def test_a_repr_shows_the_body_and_never_reads_a_payload(big: durableq.Queue) -> None:
    big.send("small body")
    big.send("z" * BIG)
    small, large = big.receive(10)
    assert "body='small body'" in repr(small)
    assert f"body=<payload of {BIG} bytes>" in repr(large) and "zzz" not in repr(large)
    assert large.body == "z" * BIG  # once read, it is the body like any other
    assert "_text" not in repr(large) and "_content" not in repr(large)


def test_small_messages_stay_inline_and_other_queues_keep_their_limit(
    broker: durableq.Broker, big: durableq.Queue
) -> None:
    big.send("small")
    (message,) = big.receive()
    assert message.payload_size is None and message.body == "small"
    assert message.open_payload().read() == b"small"
    assert payload_files(broker) == []
    plain = broker.create_queue("plain")
    with pytest.raises(durableq.InvalidParameterValue, match="allows at most 1048576"):
        plain.send("x" * BIG)
    with pytest.raises(durableq.InvalidParameterValue, match="allows at most 1048576"):
        big.send("x" * BIG, offload=False)  # the endpoint's rule: over the limit is refused
    assert payload_files(broker) == []


def test_send_file_streams_binary_and_text(
    broker: durableq.Broker, big: durableq.Queue, tmp_path: Path
) -> None:
    data = os.urandom(3 * limits.PAYLOAD_CHUNK_SIZE + 17)  # several chunks and a short last one
    source = tmp_path / "video.bin"
    source.write_bytes(data)
    big.send_file(source)
    big.send_file(io.BytesIO(b"just text"))
    first, second = big.receive(10)
    assert first.payload_size == len(data)
    with first.open_payload() as stream:
        assert stream.read(1000) == data[:1000]
        assert stream.read() == data[1000:]
    with pytest.raises(durableq.InvalidMessageContents, match="binary, not UTF-8 text"):
        first.body  # noqa: B018 - the property raises
    assert second.payload_size is None and second.body == "just text"  # small text stays inline
    with pytest.raises(durableq.InvalidParameterValue, match="does not take large payloads"):
        broker.create_queue("plain").send_file(source)
    with pytest.raises(durableq.InvalidParameterValue, match="cannot read"):
        big.send_file(tmp_path / "missing.bin")
    with pytest.raises(durableq.InvalidParameterValue, match="empty"):
        big.send_file(io.BytesIO(b"\xff" * 0))


def test_a_payload_over_the_limit_is_refused_and_leaves_no_file(
    broker: durableq.Broker, big: durableq.Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_PAYLOAD_SIZE", 2 * limits.PAYLOAD_CHUNK_SIZE)  # the rule, not 2 GiB
    with pytest.raises(durableq.InvalidParameterValue, match="over 2097152 bytes"):
        big.send_file(io.BytesIO(b"\0" * (2 * limits.PAYLOAD_CHUNK_SIZE + 1)))
    assert list(broker.payload_dir.rglob("*.partial")) == [] and payload_files(broker) == []
    assert big.stats().approximate_number_of_messages == 0


def test_expiry_purge_and_queue_deletion_remove_the_files(
    broker: durableq.Broker, clock: FakeClock, big: durableq.Queue
) -> None:
    short = broker.create_queue("short", large_payloads=True, retention_period=60)
    short.send("a" * BIG)
    big.send("b" * BIG)
    big.send("c" * BIG)
    assert len(payload_files(broker)) == 3
    clock.advance(61)
    assert short.stats().approximate_number_of_messages == 0  # the sweep removed the row ...
    assert len(payload_files(broker)) == 2  # ... and its file
    big.purge()
    assert payload_files(broker) == []
    big.send("d" * BIG)
    broker.delete_queue("big")
    assert payload_files(broker) == []


def test_moves_keep_the_payload_and_its_file_goes_with_the_message(broker: durableq.Broker) -> None:
    broker.create_queue("dlq")
    source = broker.create_queue(
        "jobs", large_payloads=True, redrive_policy=durableq.RedrivePolicy("dlq", max_receive_count=1)
    )
    body = "z" * BIG
    source.send(body)
    (first,) = source.receive(visibility_timeout=0)
    assert source.receive() == []  # its second receive moves it to the dead-letter queue
    (dead,) = broker.get_queue("dlq").receive()
    assert dead.message_id == first.message_id and dead.body == body and len(payload_files(broker)) == 1
    broker.get_queue("dlq").delete(dead.receipt_handle)
    assert payload_files(broker) == []


def test_fifo_content_deduplication_covers_payloads(broker: durableq.Broker) -> None:
    fifo = broker.create_queue("big.fifo", fifo=True, content_based_deduplication=True, large_payloads=True)
    body = "f" * BIG
    first = fifo.send(body, group_id="g")
    again = fifo.send(body, group_id="g")
    assert again.message_id == first.message_id  # the SHA-256 of the payload is its deduplication id
    (message,) = fifo.receive(10)
    assert message.deduplication_id == hashlib.sha256(body.encode()).hexdigest()
    assert message.body == body
    # The duplicate's file was written before the send knew it was one; it goes once no row names it.
    assert len(payload_files(broker)) == 2
    assert broker.sweep_payloads(grace=0) == 1 and len(payload_files(broker)) == 1


def test_a_damaged_payload_is_never_returned(
    broker: durableq.Broker, big: durableq.Queue, target: str
) -> None:
    data = os.urandom(2 * limits.PAYLOAD_CHUNK_SIZE)
    big.send_file(io.BytesIO(data))
    big.send("t" * BIG)
    binary, text = big.receive(10)
    stored = {f.name: f for f in payload_files(broker)}
    ((ref,),) = sql_rows(
        target, "SELECT payload_ref FROM durableq_messages WHERE message_id = ?", binary.message_id
    )
    damaged = bytearray(stored[str(ref)].read_bytes())
    damaged[limits.PAYLOAD_CHUNK_SIZE + 100] ^= 1  # a bit of the second chunk
    stored[str(ref)].write_bytes(bytes(damaged))
    with binary.open_payload() as stream:  # the first chunk is whole, yet not a byte of it comes out
        with pytest.raises(durableq.MessageCorrupt, match="chunk 1 does not authenticate"):
            stream.read(1)
    # A row whose checksum does not match its file: the body is never returned.
    ((meta,),) = sql_rows(
        target, "SELECT payload_meta FROM durableq_messages WHERE message_id = ?", text.message_id
    )
    values = json.loads(meta)
    values["sha256"] = hashlib.sha256(b"something else").hexdigest()
    changed = sql_run(
        target,
        "UPDATE durableq_messages SET payload_meta = ? WHERE message_id = ?",
        json.dumps(values),
        text.message_id,
    )
    assert changed == 1
    big.change_visibility(text.receipt_handle, 0)
    (fresh,) = big.receive()
    with pytest.raises(durableq.MessageCorrupt, match="SHA-256 does not match"):
        fresh.body  # noqa: B018
    big.delete(fresh.receipt_handle)  # its holder can still delete it
    # A file removed by hand.
    big.change_visibility(binary.receipt_handle, 0)
    stored[str(ref)].unlink()
    (gone,) = big.receive()
    with pytest.raises(durableq.MessageCorrupt, match="is gone"):
        gone.open_payload()


def test_another_process_deleting_removes_the_file(
    broker: durableq.Broker, big: durableq.Queue, target: str, db_path: Path
) -> None:
    big.send("p" * BIG)
    big.send("q" * BIG)
    (message,) = big.receive()
    script = textwrap.dedent(
        f"""
        import durableq
        with durableq.open({target!r}, payload_dir={payload_dir(target, db_path)!r}) as broker:
            queue = broker.get_queue("big")
            queue.delete({message.receipt_handle!r})
            queue.purge()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert payload_files(broker) == []


def test_a_file_whose_row_went_without_its_remover_is_removed_by_any_broker(
    broker: durableq.Broker, big: durableq.Queue, target: str
) -> None:
    # A process that removed rows and died before it removed their files (here: rows deleted by a
    # plain driver connection, which knows nothing of payloads) leaves their names in payload_trash,
    # written by the trigger in the deleting transaction; any broker removes the files.
    big.send("r" * BIG)
    big.send("s" * BIG)
    assert sql_run(target, "DELETE FROM durableq_messages") == 2
    assert len(payload_files(broker)) == 2
    assert len(sql_rows(target, "SELECT ref FROM durableq_payload_trash")) == 2
    assert broker.sweep_payloads() == 2  # the trash, without waiting for the orphan grace period
    assert payload_files(broker) == [] and sql_rows(target, "SELECT ref FROM durableq_payload_trash") == []


SENDER = """
import sys, durableq
with durableq.open(sys.argv[1], payload_dir=sys.argv[2]) as broker:
    broker.get_queue("big").send("k" * 1_100_000)
"""


@contextmanager
def messages_locked(target: str) -> Iterator[None]:
    """Hold a lock that keeps every other connection from inserting messages until the block ends
    (SQLite: the file's write lock; PostgreSQL: the table's)."""
    with raw_connection(target) as conn:
        if target.startswith("postgresql://"):
            conn.execute("BEGIN")
            conn.execute("LOCK TABLE durableq_messages IN EXCLUSIVE MODE")
        else:
            conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")


def _sender_killed_while_waiting(broker: durableq.Broker, target: str, *, end_its_session: bool) -> None:
    """Start a sender of a large message, let it write its payload file while the messages are locked,
    and SIGKILL it while it waits for the lock to insert the row.  On PostgreSQL the server finishes the
    statements it already received once the lock goes (a client's death is not noticed while a backend
    waits); ``end_its_session`` ends that backend too, so the kill falls between the file and the row,
    as it does on SQLite."""
    postgres = target.startswith("postgresql://")
    waiting = "FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    with messages_locked(target):
        sender = subprocess.Popen([sys.executable, "-c", SENDER, target, str(broker.payload_dir)])
        until(lambda: len(payload_files(broker)) == 1, "the sender wrote its payload file")
        if postgres:
            until(lambda: sql_rows(target, f"SELECT pid {waiting}") != [], "the sender waits for the lock")
        sender.send_signal(signal.SIGKILL)
        sender.wait(timeout=30)
        if postgres and end_its_session:
            sql_run(target, f"SELECT pg_terminate_backend(pid) {waiting}")
            until(lambda: sql_rows(target, f"SELECT pid {waiting}") == [], "the sender's backend ended")
    assert sender.returncode == -signal.SIGKILL


def test_sigkill_between_the_file_and_the_row_leaves_only_an_orphan(
    broker: durableq.Broker, big: durableq.Queue, target: str
) -> None:
    # Hold the write lock: the sender writes its payload file, then waits for the lock to insert the
    # row; it is killed there, between the two steps.
    _sender_killed_while_waiting(broker, target, end_its_session=True)
    assert sql_rows(target, "SELECT id FROM durableq_messages") == []  # no row ...
    (orphan,) = payload_files(broker)  # ... and the file it would have named
    assert broker.sweep_payloads() == 0 and orphan.exists()  # younger than the grace period: kept
    assert broker.sweep_payloads(grace=0) == 1 and not orphan.exists()
    # Every row names a file that exists (the other order of the two steps would break this).
    big.send("m" * BIG)
    for (ref,) in sql_rows(target, "SELECT payload_ref FROM durableq_messages WHERE payload_ref IS NOT NULL"):
        assert (broker.payload_dir / str(ref)[:2] / str(ref)).exists()


@pytest.mark.postgres_only("a killed client's statements that the server already received")
def test_a_killed_senders_statements_finished_by_the_server_name_a_file_that_exists(
    broker: durableq.Broker, big: durableq.Queue, target: str
) -> None:
    """On PostgreSQL a sender killed while its send waits for a lock may still have its send committed
    when the lock goes (the guarantees page: a killed call may have happened without the process
    learning it).  Either way the store is consistent: no row and an orphan kept for its grace, or one
    row whose file exists and is never swept as an orphan."""
    _sender_killed_while_waiting(broker, target, end_its_session=False)
    busy = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle'"
    until(
        lambda: sql_rows(target, f"{busy} AND pid <> pg_backend_pid()") == [], "the sender's backend is done"
    )
    # (read with SQL: the broker's fake clock is weeks after the sender's real one, and its own reads
    # would expire the message first.)
    refs = [str(ref) for (ref,) in sql_rows(target, "SELECT payload_ref FROM durableq_messages")]
    (stored,) = payload_files(broker)
    assert refs in ([], [stored.name])
    assert broker._rt.payloads.sweep_orphans(grace=0) == (0 if refs else 1)
    assert stored.exists() == bool(refs)


def test_payload_dir_is_where_open_says(tmp_path: Path) -> None:
    store = tmp_path / "elsewhere"
    with durableq.open(tmp_path / "q.db", payload_dir=store) as broker:
        assert broker.payload_dir == store
        broker.create_queue("big", large_payloads=True).send("x" * BIG)
        assert len(payload_files(broker)) == 1 and store.is_dir()
        assert (store.stat().st_mode & 0o777) == limits.PAYLOAD_DIR_MODE
        assert all((f.stat().st_mode & 0o777) == limits.DEFAULT_FILE_MODE for f in payload_files(broker))
    with durableq.open(tmp_path / "default.db") as broker:
        assert broker.payload_dir == tmp_path / "default.db.payloads"


def test_deleting_a_temporary_queue_removes_its_files(broker: durableq.Broker) -> None:
    """Every path that deletes a queue removes its payload files: here a temporary queue's own delete
    (at the end of its ``with`` block)."""
    with broker.temporary_queue("big", large_payloads=True) as ended:
        ended.send("a" * BIG)
        assert len(payload_files(broker)) == 1
    assert payload_files(broker) == []


def test_reaping_an_idle_queue_removes_its_files(broker: durableq.Broker, clock: FakeClock) -> None:
    """... and the reaping of an idle temporary queue (here on a management call, as any broker does)."""
    idle = broker.temporary_queue("idle", idle_timeout=60, large_payloads=True)
    idle.send("b" * BIG)
    broker._rt.temporary_queues.release(idle.name)  # as if its holder were gone: no more heartbeats
    clock.advance(200)
    assert broker.list_queues() == []  # reaped on the way
    assert payload_files(broker) == []
