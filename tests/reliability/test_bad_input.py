"""Bad input: hostile arguments to every public function give DurableQError (or TypeError), nothing else,
and never damage the file.  The Hypothesis test searches; the cases below pin what it found."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq import RedrivePolicy

from .fuzz import check_call, fuzz, prepare


def test_every_public_function_refuses_hostile_arguments_cleanly(tmp_path: Path, target: str) -> None:
    """On either engine (``target``: the suite's SQLite file, or a PostgreSQL database)."""
    assert fuzz(tmp_path, max_examples=400, db=target) > 400


# A receipt handle of the right shape whose numbers do not fit SQLite's 64-bit integers.
HUGE_HANDLE = "9999999999999999999.9999999999999999999.0123456789abcdef.0123456789abcdef"


def huge_row(queue: durableq.Queue) -> str:
    """A handle of ``queue`` (its real queue id) whose row number does not fit SQLite's integers."""
    queue.send("for its handle", group_id="g" if queue.fifo else None)
    (message,) = queue.receive(visibility_timeout=0)
    return message.receipt_handle.split(".")[0] + HUGE_HANDLE[HUGE_HANDLE.index(".") :]


# Values of the wrong type, typed Any so that the calls type-check.
WRONG_TYPE: dict[str, Any] = {"int": 2**63, "pairs": [("k", "v")]}
Case = Callable[[durableq.Broker, Path], Any]
CASES: dict[str, Case] = {
    "open: a path with a NUL byte": lambda b, d: durableq.open(d / "a\x00b"),
    "open: a path with a lone surrogate": lambda b, d: durableq.open(d / "a\ud800b"),
    "open: a file name longer than the system allows": lambda b, d: durableq.open(d / ("A" * 300)),
    "list_queues: a prefix with a lone surrogate": lambda b, d: b.list_queues("\ud800"),
    "cancel_message_move: a handle with a lone surrogate": lambda b, d: b.cancel_message_move("\ud800"),
    "cancel_message_move: a handle that is a huge int": lambda b, d: b.cancel_message_move(WRONG_TYPE["int"]),
    "create_queue: a dead-letter queue name with a lone surrogate": lambda b, d: b.create_queue(
        "q", redrive_policy=RedrivePolicy("\ud800", 1)
    ),
    "create_queue: tags given as a list of pairs": lambda b, d: b.create_queue("q", tags=WRONG_TYPE["pairs"]),
    "set_attributes: a policy with a lone surrogate": lambda b, d: b.get_queue("fuzz").set_attributes(
        policy="\ud800"
    ),
    "set_attributes: a KMS key id with a lone surrogate": lambda b, d: b.get_queue("fuzz").set_attributes(
        kms_master_key_id="\ud800"
    ),
    "untag: a key with a lone surrogate": lambda b, d: b.get_queue("fuzz").untag("\ud800"),
    "delete: a handle whose numbers overflow (standard)": lambda b, d: b.get_queue("fuzz").delete(
        HUGE_HANDLE
    ),
    "delete: a handle whose numbers overflow (FIFO)": lambda b, d: b.get_queue("fuzz.fifo").delete(
        HUGE_HANDLE
    ),
    "delete_batch: a handle of the queue whose row number overflows": lambda b, d: b.get_queue(
        "fuzz"
    ).delete_batch([huge_row(b.get_queue("fuzz"))]),
    "change_visibility: a handle whose numbers overflow": lambda b, d: b.get_queue("fuzz").change_visibility(
        HUGE_HANDLE, 5
    ),
    "change_visibility_batch: a handle whose numbers overflow": lambda b, d: b.get_queue(
        "fuzz"
    ).change_visibility_batch([(HUGE_HANDLE, 5)]),
}


@pytest.fixture
def broker(tmp_path: Path, target: str) -> Iterator[durableq.Broker]:
    opened, _ = prepare(tmp_path, target)
    yield opened
    opened.close()


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_argument_gives_a_durableq_error(
    broker: durableq.Broker, tmp_path: Path, case: str
) -> None:
    check_call(case, lambda: CASES[case](broker, tmp_path / "opened"))
