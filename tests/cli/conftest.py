"""Fixtures of the CLI tests: a database file, a runner that checks the exit status,
and the library opened on the same file to check what a command did.

The CLI opens the file with the real clock, so these tests share it: they use
visibility timeouts of 0 and the like instead of waiting, and never a fake clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from durableq.cli import main

import durableq

Run = Callable[..., Result]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


@pytest.fixture
def location(target: str, db: Path) -> str:
    """What ``--db`` names: the file ``db`` (SQLite), or a new PostgreSQL database (``[postgresql]``)."""
    return str(db) if not target.startswith("postgresql://") else target


@pytest.fixture
def run(location: str, db: Path) -> Run:
    """``run(*args, code=0, input=None, env=None)``: ``durableq --db DB *args``, checking the exit status."""
    runner = CliRunner()

    def invoke(
        *args: str, code: int = 0, input: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        options = ["--db", location]
        if location.startswith("postgresql://"):  # large payloads on PostgreSQL need a payload store
            options += ["--payload-dir", f"{db}.payloads"]
        result = runner.invoke(main, [*options, *args], input=input, env=env, catch_exceptions=False)
        assert result.exit_code == code, f"exit {result.exit_code}, wanted {code}:\n{result.output}"
        assert "Traceback" not in result.output
        return result

    return invoke


@pytest.fixture
def broker(location: str) -> Iterator[durableq.Broker]:
    """The library on the CLI's database (creating it), to set up and check."""
    with durableq.open(location, durability="normal") as opened:
        yield opened
