"""This round's new public calls answer wrong input with a durableq error (or ``TypeError``), never a
raw ``AttributeError`` or ``ValueError``."""

from __future__ import annotations

from pathlib import Path

import pytest

import durableq


@pytest.mark.parametrize("given", ["not a message", None, 3])
def test_dead_letter_due_takes_a_message(queue: durableq.Queue, given: object) -> None:
    with pytest.raises((durableq.InvalidParameterValue, TypeError), match="message"):
        queue.dead_letter_due(given)  # type: ignore[arg-type]


@pytest.mark.parametrize("keyring", ["keys\x00.json", "keys.json\x00"])
def test_a_keyring_path_with_a_nul_byte_is_refused_clearly(db_path: Path, keyring: str) -> None:
    with pytest.raises(durableq.DurableQError, match="keyring"):
        durableq.open(db_path, keyring=db_path.parent / keyring)
    with pytest.raises(durableq.DurableQError, match="keyring"):
        durableq.Keyring(db_path.parent / keyring).check()
