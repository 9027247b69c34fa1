"""Running the shell examples of the docs, line by line, in a folder of their own.

``durableq ...`` lines run in this process through the CLI's entry point (so
that the Spark commands share one JVM), ``python ...`` lines as processes,
``export`` sets the environment of the lines after it.  A few kinds of line
are not run (:data:`NOT_RUN` says why); any other line fails the test, so a
new kind of example cannot go untested unnoticed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from durableq.cli import main

from .markdown import Block

ROOT = Path(__file__).resolve().parents[2]

#: First words of lines the tests do not run, and why.
NOT_RUN = {
    "make": "sets up this repository (the tests run inside what it set up)",
    "pip": "installs packages (the test environment has every extra)",
    "apt-get": "installs system packages",
    "aws": "needs a running endpoint: test_readme.py runs the endpoint's examples with one",
    ".venv/bin/python": "runs the test suites and stress runs of this repository (these tests are in one)",
    "scripts/conformance": "runs moto's suite against the endpoint (a moto checkout; minutes)",
}
#: ``NAME=VALUE`` words before a command: its environment.
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


class Shell:
    """A folder (holding a copy of ``examples/``) and the environment the lines run with.

    A database a ``durableq`` line names (``--db`` or ``$DURABLEQ_DB``) that
    does not exist yet is a copy of ``sample_db``: the docs' commands assume a
    file with queues in it.  Absolute paths in a line are taken inside the folder.
    """

    def __init__(self, folder: Path, sample_db: Path, replace: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.sample_db = sample_db
        self.replace = replace or {}  # text of the docs -> what the tests run instead (a database URL)
        self.env: dict[str, str | None] = {"DURABLEQ_DB": None}
        shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))

    def run(self, block: Block) -> str:
        """Run every line of ``block``; returns what they printed on stdout."""
        printed = []
        for line in block.text.replace("\\\n", " ").splitlines():  # a backslash continues a line
            for shown, actual in self.replace.items():
                line = line.replace(shown, actual)
            words = shlex.split(line, comments=True)
            assigned: dict[str, str] = {}  # VAR=VALUE before the command: its environment
            while words and _ASSIGNMENT.match(words[0]):
                name, value = words.pop(0).split("=", 1)
                assigned[name] = value
            if not words:
                continue
            where = f"{block.label}: {line.strip()}"
            if words[0] in NOT_RUN or (words[0] == "durableq" and "serve" in words):
                continue  # see NOT_RUN; `durableq serve` runs in test_readme.py's endpoint test
            if words[0] == "export":
                self.env.update(word.split("=", 1) for word in words[1:])  # type: ignore[misc]
            elif words[0] == "durableq":
                printed.append(self._durableq([self._inside(w) for w in words[1:]], where, assigned))
            elif words[0] == "python":
                printed.append(self._python(words[1:], where, assigned))
            else:
                raise AssertionError(f"{where}: the docs tests do not know how to run this line")
        return "".join(printed)

    def _inside(self, word: str) -> str:
        return str(self.folder / word.lstrip("/")) if word.startswith("/") else word

    def _durableq(self, args: list[str], where: str, assigned: dict[str, str]) -> str:
        env = {**self.env, **assigned}
        named = args[args.index("--db") + 1] if "--db" in args else env.get("DURABLEQ_DB")
        if named and not named.startswith("postgresql://") and not (self.folder / named).exists():
            shutil.copyfile(self.sample_db, self.folder / named)
        with contextlib.chdir(self.folder):
            result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
        assert result.exit_code == 0, f"{where}: exit status {result.exit_code}\n{result.output}"
        return result.stdout

    def _python(self, args: list[str], where: str, assigned: dict[str, str]) -> str:
        env = {k: v for k, v in {**os.environ, **self.env, **assigned}.items() if v is not None}
        done = subprocess.run(
            [sys.executable, *args], cwd=self.folder, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{where}: exit status {done.returncode}\n{done.stderr[-3000:]}"
        return done.stdout
