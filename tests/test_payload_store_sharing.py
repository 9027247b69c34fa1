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
