"""A payload store serves one database.  Two databases given the same ``payload_dir`` (an application
with two queue files and one configured store folder) must not take each other's files for orphans:
each one's sweep removes the files that no row *of its own* names, older than an hour, and a message
easily lives longer than that (the default retention is 4 days)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import durableq


def test_a_store_shared_by_two_databases_never_loses_either_ones_payloads(tmp_path: Path) -> None:
    store = tmp_path / "payloads"
    body = "x" * 5_000
    with (
        durableq.open(tmp_path / "jobs.db", durability="normal", payload_dir=store) as jobs,
        durableq.open(tmp_path / "events.db", durability="normal", payload_dir=store) as events,
    ):
        queue = jobs.create_queue("jobs", large_payloads=True, maximum_message_size=1024)
        queue.send(body)
        hours_ago = time.time() - 2 * 3_600  # the message was sent two hours ago
        for file in store.rglob("*"):
            if file.is_file():
                os.utime(file, (hours_ago, hours_ago))
        try:
            events.sweep_payloads()  # what the other database's brokers do on their own, every 10 min
        except durableq.DurableQError:
            pass  # refusing the shared store is a fine answer too
        (message,) = queue.receive()
        assert message.unreadable is None and message.body == body


def test_a_marker_cut_before_its_first_byte_does_not_refuse_the_store(tmp_path: Path) -> None:
    # A process killed between creating the store's marker and writing the database's identity into
    # it (the hostile mix did that, on PostgreSQL) left an empty marker, and every later send of a
    # large payload was refused: "its .durableq-database names ''".  A marker is written whole or not
    # at all, and an empty one (from a cut of an earlier version) names no database.
    from durableq.ops.payload_owner import MARKER

    store = tmp_path / "payloads"
    store.mkdir(mode=0o700)
    (store / MARKER).touch(mode=0o600)
    with durableq.open(tmp_path / "jobs.db", durability="normal", payload_dir=store) as broker:
        queue = broker.create_queue("jobs", large_payloads=True, maximum_message_size=1024)
        queue.send("x" * 5_000)
        (message,) = queue.receive()
        assert message.body == "x" * 5_000
    assert (store / MARKER).read_text().strip() != ""
    assert [p.name for p in store.iterdir() if p.name.startswith(MARKER)] == [MARKER]  # no stray copy
