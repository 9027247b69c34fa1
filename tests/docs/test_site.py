"""The documentation site builds in strict mode: a broken link or anchor, a page missing from the
navigation, or an API or CLI reference that names nothing fails the build, and so this test.

mkdocs comes with the `docs` extra, which the `test` extra installs: a missing mkdocs fails here
(it is not a reason to skip).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from durableq.cli import main

from .shell import ROOT


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[str]:
    found = []
    for name, command in sorted(group.commands.items()):
        found.append(" ".join((*path, name)))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*path, name)))
    return found


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    assert importlib.util.find_spec("mkdocs") is not None, (
        "mkdocs is not installed: pip install -e '.[docs]' (the test extra includes it)"
    )
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    # The generated references say something: the API from the docstrings, the CLI from click.
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("create_queue", "send_batch", "QueueDoesNotExist", "Requester", "BufferedQueue"):
        assert name in api, f"the API reference lacks {name}"
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for path in _commands(main):
        assert f"durableq {path}" in cli, f"the CLI reference lacks durableq {path}"
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Unreleased" in changelog  # CHANGELOG.md is included, not linked
