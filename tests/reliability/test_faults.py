"""Faults: a full disk, read-only files and folders, damaged files, a lock held by another process."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from . import faults


def _disk_full_kinds() -> list[str]:
    """RLIMIT_FSIZE always; a real full filesystem (tmpfs) where this machine lets us mount one."""
    with tempfile.TemporaryDirectory() as folder:
        return ["rlimit", "tmpfs"] if faults.tmpfs_works(Path(folder)) else ["rlimit"]


@pytest.mark.parametrize("how", _disk_full_kinds())
def test_a_full_disk_gives_a_clear_error_and_loses_nothing(tmp_path: Path, how: str) -> None:
    figures = faults.check_disk_full(tmp_path, how)
    assert figures["messages"] > 0  # some sends were acknowledged before the room ran out


@pytest.mark.parametrize("case", faults.READ_ONLY_CASES)
def test_a_file_the_process_may_not_write_gives_a_clear_error(case: str) -> None:
    with faults.permissive_folder() as folder:
        outcomes = faults.check_read_only(folder / "data", case)
    assert outcomes["send"].error is not None


@pytest.fixture(scope="module")
def good_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return faults.sample_file(tmp_path_factory.mktemp("good") / "good.db")


@pytest.mark.parametrize("how", faults.DAMAGES)
def test_a_damaged_file_is_reported_and_never_replaced(good_file: Path, tmp_path: Path, how: str) -> None:
    content = faults.damage(good_file, how, random.Random(how))
    outcomes = faults.check_damaged(tmp_path / "damaged.db", content, how)
    assert any(o.error == "DatabaseCorrupt" for o in outcomes.values())


@pytest.mark.parametrize("exclusive", [False, True], ids=["write lock", "exclusive lock"])
def test_a_lock_held_by_another_process_waits_then_raises_database_locked(
    tmp_path: Path, exclusive: bool
) -> None:
    faults.check_locked(tmp_path, exclusive)


def test_an_sqlite_file_whose_names_collide_with_durableqs_is_refused_and_left_alone(tmp_path: Path) -> None:
    faults.check_sqlite_file_of_another_application(tmp_path)


def test_closing_a_broker_on_a_full_disk_still_closes_the_database(tmp_path: Path) -> None:
    """close() may fail to write the last counters when the disk is full, but must let go of the file."""
    how = _disk_full_kinds()[-1]  # a real full filesystem where possible: there the last flush fails
    figures = faults.check_disk_full(tmp_path, how)
    assert figures["files_left_open"] == 0, (
        f"after Broker.close() raised ({figures['close_errors']} close errors), the process still had "
        f"{figures['files_left_open']} of the database's files open"
    )
