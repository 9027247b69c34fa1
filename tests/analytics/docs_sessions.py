"""The shell sessions shown in docs/analytics.md and docs/guides/spark.md.

A session is a ``console`` block between ``<!-- session: NAME -->`` and
``<!-- /session -->``: lines starting with ``$ `` are commands, the lines after
each its output.  The output is never typed: regenerate it (and
docs/analytics-activity.png, the plot one of the commands draws) with

    python -m tests.analytics.docs_sessions

which runs every command in a fresh folder per document, as written, with
this checkout's ``python``, ``durableq`` and ``spark-submit`` first on PATH.
test_docs.py runs the same commands and compares their output with what the
documents show.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "docs" / "analytics.md", ROOT / "docs" / "guides" / "spark.md")
#: The plot a session draws, and where the documents show it from.
PLOT, SHOWN_PLOT = "activity.png", ROOT / "docs" / "analytics-activity.png"

PROMPT = "$ "
#: Longer outputs are cut after this many lines, with a line saying how many more there were.
MAX_LINES = 24
_MORE = re.compile(r"^\.\.\. \((\d+) more lines\)$")
_SESSION = re.compile(
    r"(?P<head><!-- session: (?P<name>[\w-]+) -->\n```console\n)"
    r"(?P<body>.*?)"
    r"(?P<tail>```\n<!-- /session -->)",
    re.S,
)


@dataclass
class Step:
    command: str
    #: The output as shown (at most MAX_LINES lines and the "... (N more lines)" line).
    output: list[str] = field(default_factory=list)


def parse(body: str) -> list[Step]:
    steps: list[Step] = []
    for line in body.splitlines():
        if line.startswith(PROMPT):
            steps.append(Step(line[len(PROMPT) :]))
        elif steps:
            steps[-1].output.append(line)
        elif line.strip():
            raise ValueError(f"a session must start with a command ({PROMPT}...): {line!r}")
    return steps


def sessions(document: Path) -> list[tuple[str, list[Step]]]:
    """The sessions of ``document``, in order, with the output each shows."""
    return [(m["name"], parse(m["body"])) for m in _SESSION.finditer(document.read_text())]


def shown(output: str) -> list[str]:
    """How a command's output appears in a document."""
    lines = output.rstrip("\n").splitlines()
    if len(lines) > MAX_LINES:
        return [*lines[:MAX_LINES], f"... ({len(lines) - MAX_LINES} more lines)"]
    return lines


def comparable(lines: list[str]) -> list[str]:
    """Lines with what changes from run to run made uniform: numbers and times, column widths."""
    kept = [line for line in lines if not _MORE.match(line)]
    return [
        re.sub(r"-{2,}", "-", re.sub(r"\s+", " ", re.sub(r"\d+(\.\d+)?", "N", line))).strip() for line in kept
    ]


def environment() -> dict[str, str]:
    """This checkout's tools first on PATH (the venv's python, durableq, spark-submit)."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def workspace() -> Path:
    """A fresh folder where ``examples/`` is this checkout's, as in the repository's root."""
    folder = Path(tempfile.mkdtemp(prefix="durableq-docs-"))
    (folder / "examples").symlink_to(ROOT / "examples")
    return folder


def run(command: str, cwd: Path) -> str:
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command!r} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout


def regenerate(document: Path) -> None:
    """Run the sessions of ``document`` in a fresh folder and write their output into it."""
    folder = workspace()
    try:
        text = document.read_text()

        def rewritten(match: re.Match[str]) -> str:
            lines = []
            for step in parse(match["body"]):
                print(f"{document.name}: $ {step.command}", file=sys.stderr)
                lines += [PROMPT + step.command, *shown(run(step.command, folder))]
            return match["head"] + "\n".join(lines) + "\n" + match["tail"]

        document.write_text(_SESSION.sub(rewritten, text))
        if (folder / PLOT).exists():
            shutil.copyfile(folder / PLOT, SHOWN_PLOT)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    for doc in DOCUMENTS:
        regenerate(doc)
