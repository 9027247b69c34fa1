"""Worker processes open the database as their parent's broker was opened (``Broker.options``: the
keyring, the payload store, the busy timeout, the durability, the clock), or the worker is refused
at once when something of it cannot reach another process."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pickle
import threading
import time
from pathlib import Path

import pytest

import durableq
from tests import worker_handlers
from tests.conftest import until
from tests.worker_handlers import events


def test_a_broker_keeps_how_it_was_opened(target: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    durableq.Keyring(keys).create("orders")
    with durableq.open(target, durability="normal", busy_timeout=3, keyring=keys) as broker:
        options = broker.options
        assert isinstance(options, durableq.OpenOptions)
        assert (options.location, options.durability, options.busy_timeout) == (target, "normal", 3.0)
        assert options.keyring is broker.keyring and options.keyring.path == keys
        assert options.payload_dir is None  # the default: broker.payload_dir says where it is
        assert options.clock is time.time
        with pytest.raises(dataclasses.FrozenInstanceError):
            options.busy_timeout = 1  # type: ignore[misc]


def test_reopen_opens_the_same_database_the_same_way(target: str, tmp_path: Path) -> None:
    keys, store = tmp_path / "keys.json", tmp_path / "store"
    durableq.Keyring(keys).create("orders")
    with durableq.open(target, durability="normal", keyring=keys, payload_dir=store) as first:
        queue = first.create_queue(
            "orders", kms_master_key_id="alias/orders", large_payloads=True, maximum_message_size=262_144
        )
        queue.send("x" * 300_000)  # sealed, in the payload store
        with durableq.reopen(first.options) as second:
            assert second.options == first.options
            [message] = second.get_queue("orders").receive()
            assert message.body == "x" * 300_000
    with pytest.raises(durableq.InvalidParameterValue, match="OpenOptions"):
        durableq.reopen(target)  # type: ignore[arg-type]


def test_options_pickle_with_the_keyring_as_its_path(tmp_path: Path) -> None:
    """A worker process is sent its options pickled: the keyring goes as its file's path (no key
    material is copied anywhere), the clock by reference."""
    keys = tmp_path / "keys.json"
    ring = durableq.Keyring(keys)
    ring.create("orders")
    options = durableq.OpenOptions(
        tmp_path / "q.db", durability="normal", busy_timeout=2, keyring=ring, payload_dir=tmp_path / "p"
    )
    sent = pickle.dumps(options)
    _, material = ring.material("orders")
    assert material not in sent and base64.b64encode(material) not in sent
    back = pickle.loads(sent)
    assert back == options and back.keyring.path == keys and back.keyring is not ring
    assert back.keyring.material("orders") == ring.material("orders")
    assert back.location == str(tmp_path / "q.db") and back.payload_dir == tmp_path / "p"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"durability": "fast"}, "durability"),
        ({"busy_timeout": -1}, "busy_timeout"),
        ({"busy_timeout": True}, "busy_timeout"),
        ({"clock": 5}, "clock"),
        ({"payload_dir": 5}, "payload_dir"),
        ({"keyring": 5}, "keyring"),
    ],
)
def test_options_are_checked_as_open_checks_them(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match=match):
        durableq.OpenOptions(tmp_path / "q.db", **kwargs)
    with pytest.raises(durableq.InvalidParameterValue, match=match):
        durableq.open(tmp_path / "q.db", **kwargs)
    with pytest.raises(durableq.InvalidParameterValue, match="path"):
        durableq.OpenOptions(5)  # type: ignore[arg-type]


def _empty(queue: durableq.Queue) -> bool:
    stats = queue.stats()
    return stats.approximate_number_of_messages + stats.approximate_number_of_messages_not_visible == 0


def test_worker_processes_handle_an_encrypted_queue_with_a_payload_store(target: str, tmp_path: Path) -> None:
    log, keys, store = tmp_path / "jobs.log", tmp_path / "keys.json", tmp_path / "store"
    durableq.Keyring(keys).create("orders")
    with durableq.open(
        target,
        keyring=keys,
        payload_dir=store,
        busy_timeout=7.5,
        durability="normal",
        clock=worker_handlers.wall_clock,
    ) as broker:
        queue = broker.create_queue(
            "jobs", kms_master_key_id="alias/orders", large_payloads=True, maximum_message_size=1024
        )
        for i in range(4):  # each over the 1 KiB maximum: its body goes to the payload store, sealed
            queue.send(json.dumps({"id": f"j{i}", "log": str(log), "padding": "x" * 2_000}))
        assert len(list(store.glob("??/*"))) == 4  # payload files: AB/ABCD…
        worker = durableq.Worker(
            queue, worker_handlers.record_opened, processes=True, concurrency=2, wait_time=1
        )
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            until(lambda: _empty(queue), "the worker processes handled and deleted every message", 60)
        finally:
            worker.stop()
            thread.join(60)
        assert not thread.is_alive()
    done = sorted(job for event, job, pid, _ in events(str(log)) if event == "end" and pid != os.getpid())
    assert done == ["j0", "j1", "j2", "j3"]
    opened = [json.loads(line) for line in Path(f"{log}.opened").read_text().splitlines()]
    assert len(opened) == 4 and os.getpid() not in {o["pid"] for o in opened}
    for child in opened:
        del child["pid"]
        assert child == {
            "location": target,
            "durability": "normal",
            "busy_timeout": 7.5,
            "keyring": str(keys),
            "payload_dir": str(store),
            "clock": "wall_clock",
        }


def test_what_cannot_reach_a_worker_process_is_refused_at_once(target: str) -> None:
    with durableq.open(target, clock=lambda: time.time(), durability="normal") as broker:
        queue = broker.create_queue("jobs")
        with pytest.raises(durableq.InvalidParameterValue, match=r"processes=True.*the broker's clock"):
            durableq.Worker(queue, worker_handlers.record, processes=True)
        durableq.Worker(queue, worker_handlers.record)  # threads share the clock
    with durableq.open(target, durability="normal") as broker:
        queue = broker.get_queue("jobs")
        with pytest.raises(durableq.InvalidParameterValue, match=r"processes=True.*handler"):
            durableq.Worker(queue, lambda message: None, processes=True)
        with pytest.raises(durableq.InvalidParameterValue, match=r"processes=True.*backoff"):
            durableq.Worker(queue, worker_handlers.record, processes=True, backoff=lambda n: 1)
        with pytest.raises(durableq.InvalidParameterValue, match=r"processes=True.*process_initializer"):
            durableq.Worker(queue, worker_handlers.record, processes=True, process_initializer=lambda: None)
