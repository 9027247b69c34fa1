"""Large payloads on an encrypted queue under SIGKILL: senders and consumers killed at random moments
(between a payload file and its row, between a row's delete and its file's removal, mid-stream),
then checked against what each process saw acknowledged.

Promises checked: an acknowledged send is in the queue unless an acknowledged delete took it; every
row names a payload file that exists and reads back whole, checked; once no process runs, a sweep
leaves exactly the files rows name (no leak, no loss).
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import durableq
from durableq.ops.payload_owner import MARKER

QUEUE = "scans"
#: Bodies from just over the queue's size limit (1 KiB) to 3 MiB: several 1 MiB chunks each.
SIZES = (1_100, 3 * 1024 * 1024)

SENDER = """
import hashlib, io, json, os, random, sys
import durableq
db, keyring, journal, low, high = sys.argv[1:6]
with durableq.open(db, keyring=keyring) as broker, open(journal, "a") as log:
    queue = broker.get_queue("scans")
    while True:
        token = os.urandom(8).hex()
        data = os.urandom(random.randint(int(low), int(high)))
        digest = hashlib.sha256(data).hexdigest()
        log.write(json.dumps({"begin": token}) + "\\n"); log.flush()
        queue.send_file(io.BytesIO(data), attributes={"token": token, "sha256": digest})
        log.write(json.dumps({"sent": token}) + "\\n"); log.flush()
"""

CONSUMER = """
import hashlib, json, sys
import durableq
db, keyring, journal = sys.argv[1:4]
with durableq.open(db, keyring=keyring) as broker, open(journal, "a") as log:
    queue = broker.get_queue("scans")
    while True:
        for message in queue.receive(max_messages=2, visibility_timeout=1, wait_time=1):
            digest = hashlib.sha256()
            with message.open_payload() as payload:
                for chunk in iter(lambda: payload.read(1 << 20), b""):
                    digest.update(chunk)
            assert digest.hexdigest() == message.attributes["sha256"].value, "a payload came back altered"
            token = message.attributes["token"].value
            log.write(json.dumps({"deleting": token}) + "\\n"); log.flush()
            queue.delete(message.receipt_handle)
            log.write(json.dumps({"deleted": token}) + "\\n"); log.flush()
"""


def _journal(folder: Path) -> dict[str, set[str]]:
    """Tokens by step of every journal: ``begin`` (a send began), ``sent`` (it returned),
    ``deleting`` (a delete began), ``deleted`` (it returned)."""
    seen: dict[str, set[str]] = {"begin": set(), "sent": set(), "deleting": set(), "deleted": set()}
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:  # a line cut by the kill
                continue
            for step, token in entry.items():
                seen[step].add(token)
    return seen


def test_payloads_survive_random_kills(tmp_path: Path, rng: random.Random) -> None:
    db, keyring = tmp_path / "payloads.db", tmp_path / "keys.json"
    durableq.Keyring(keyring).create("scans")
    with durableq.open(db, keyring=keyring) as broker:
        broker.create_queue(
            QUEUE, large_payloads=True, maximum_message_size=1024, kms_master_key_id="alias/scans"
        )
    journals = tmp_path / "journals"
    journals.mkdir()
    scripts = {"sender": SENDER, "consumer": CONSUMER}
    roles = ["sender", "sender", "consumer"]
    processes: list[subprocess.Popen[bytes] | None] = [None] * len(roles)
    starts = kills = 0

    def start(slot: int) -> None:
        nonlocal starts
        starts += 1
        journal = journals / f"{roles[slot]}-{starts}.jsonl"
        processes[slot] = subprocess.Popen(
            [
                sys.executable,
                "-c",
                scripts[roles[slot]],
                str(db),
                str(keyring),
                str(journal),
                *map(str, SIZES),
            ],
            stderr=subprocess.PIPE,
        )

    for slot in range(len(roles)):
        start(slot)
    deadline = time.monotonic() + 12
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.4))  # the random moment of the next kill
            slot = rng.randrange(len(roles))
            process = processes[slot]
            assert process is not None
            if process.poll() is not None:  # it died on its own: that is a failure, with its reason
                raise AssertionError(f"{roles[slot]} exited: {process.stderr.read().decode()[-2000:]}")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            kills += 1
            start(slot)
    finally:
        for process in processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)

    journal = _journal(journals)
    sent, deleted = journal["sent"], journal["deleted"]
    assert kills >= 10 and len(sent) >= 10 and len(deleted) >= 5, (kills, len(sent), len(deleted))
    with durableq.open(db, keyring=keyring) as broker:
        queue = broker.get_queue(QUEUE)
        present = {p.attributes["token"].value: p for p in queue.peek(limit=1_000)}
        # A delete may commit and its process die before it says so: only sends no delete was begun
        # for must still be there.
        assert sent - journal["deleting"] <= set(present), "an acknowledged send is gone"
        assert set(present) <= journal["begin"] - deleted, "a message from nowhere, or back after its delete"
        # Every row's file is there and reads back whole (through a receive: the checked stream).
        while messages := queue.receive(max_messages=10, visibility_timeout=600):
            for message in messages:
                with message.open_payload() as payload:
                    data = payload.read()
                assert hashlib.sha256(data).hexdigest() == message.attributes["sha256"].value
                assert len(data) == message.payload_size
        with sqlite3.connect(db) as conn:
            refs = {
                ref
                for (ref,) in conn.execute(
                    "SELECT payload_ref FROM durableq_messages WHERE payload_ref IS NOT NULL"
                )
            }
        swept = broker.sweep_payloads(grace=0)  # no process runs: every file no row names is an orphan
        files = {f.name for f in broker.payload_dir.rglob("*") if f.is_file() and f.name != MARKER}
        assert files == refs, f"leaked files {files - refs}, lost files {refs - files}"
        assert len(refs) == len(present)
    print(f"payload crashes: {kills} kills, {len(sent)} sends, {len(deleted)} deletes, {swept} files swept")
