"""Four processes sending and receiving on one database (a SQLite file, a PostgreSQL database) for
20 s: no error reaches them, counters exact."""

from __future__ import annotations

import random
from pathlib import Path

from .scenarios import concurrency_run


def test_four_processes_share_one_file_without_errors_losses_or_double_holds(
    tmp_path: Path, target: str, rng: random.Random
) -> None:
    # On each engine ([sqlite]: a file in tmp_path; [postgresql]: a fresh database, a copy of the
    # migrated template, dropped afterwards).
    figures = concurrency_run(tmp_path, rng, seconds=20, processes=4, db=target)
    # check_file fails on any DurableQError a process met (DatabaseLocked included) unless it was a
    # delete or visibility change after the lease may have ended; here none may have happened at all.
    assert figures["late_errors"] == 0, figures
    assert figures["operations"] > 1000, figures
