"""The analytics documentation runs as written: every command of its sessions prints what the page
shows (up to numbers and times), and its Python examples run."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from durableq.cli import main
from matplotlib.image import imread
from pyspark.sql import SparkSession

from durableq.analytics.plot import DPI, figure_size

from . import docs_sessions
from .docs_sessions import DOCUMENTS, Step, comparable, shown

ANALYTICS_SECTION = re.compile(r"<!-- analytics:start -->(.*?)<!-- analytics:end -->", re.S)


def python_blocks(document: Path) -> list[str]:
    text = document.read_text()
    if section := ANALYTICS_SECTION.findall(text):  # a page with more than analytics: its section
        [text] = section
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.fixture
def folder() -> Iterator[Path]:
    made = docs_sessions.workspace()
    yield made
    shutil.rmtree(made, ignore_errors=True)


def output_of(step: Step, folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    words = shlex.split(step.command)
    if words[0] != "durableq":
        return docs_sessions.run(step.command, folder)
    # The durableq command itself, in this process: it uses the tests' running Spark session.
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(main, words[1:], catch_exceptions=False)
    assert result.exit_code == 0, (step.command, result.output)
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_the_documented_sessions_print_what_is_shown(
    spark: SparkSession, document: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documented = docs_sessions.sessions(document)
    assert documented, f"{document} shows no session"
    for name, steps in documented:
        for step in steps:
            got = shown(output_of(step, folder, monkeypatch))
            assert comparable(got) == comparable(step.output), (name, step.command, got)
    if document.name == "analytics.md":
        # The plot of the first session: one row of panels for each of the demo's five queues.
        width, height = figure_size(5)
        assert imread(folder / docs_sessions.PLOT).shape[:2] == (round(height * DPI), round(width * DPI))
    # The Python examples, against the file the sessions wrote.
    monkeypatch.chdir(folder)
    for block in python_blocks(document):
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(block, f"{document.name} example", "exec"), {})
        assert printed.getvalue().strip(), block
