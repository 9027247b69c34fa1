"""A broker opened with a relative path keeps using the file it opened, whatever the process's working
folder becomes (a daemon changes it to ``/``): every thread's connection, the payload store, and the
processes of a worker reopen the same file, never a new one elsewhere."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq


@pytest.fixture
def in_folder(tmp_path: Path) -> Iterator[Path]:
    before = os.getcwd()
    (tmp_path / "app").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "app")
    try:
        yield tmp_path
    finally:
        os.chdir(before)


def _in_thread(call: object) -> object:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return outcome[0]


def test_a_relative_path_keeps_naming_the_file_opened_after_a_chdir(in_folder: Path) -> None:
    with durableq.open("queue.db", durability="normal") as broker:
        queue = broker.create_queue("jobs")
        queue.send("before")
        os.chdir(in_folder / "elsewhere")
        sent = _in_thread(lambda: queue.send("after"))  # a new thread: a new connection
        assert isinstance(sent, durableq.SendResult), sent
        assert sorted(m.body for m in queue.peek()) == ["after", "before"]
    assert not (in_folder / "elsewhere" / "queue.db").exists(), "a second database was made"


def test_the_payload_store_beside_a_relative_path_stays_where_it_was(in_folder: Path) -> None:
    with durableq.open("queue.db", durability="normal") as broker:
        queue = broker.create_queue("jobs", large_payloads=True, maximum_message_size=1024)
        queue.send("x" * 5_000)
        os.chdir(in_folder / "elsewhere")
        (message,) = queue.receive()  # this thread's connection was opened before: the same file
        assert message.unreadable is None and message.body == "x" * 5_000
