"""The README and every page of the documentation site run as written: their Python examples,
their command-line sessions, their shell examples, the PostgreSQL example on the test cluster, and
the endpoint's examples against a real `durableq serve`.

Each Python example runs as a program in an empty folder of its own (so it must
define every name it uses); what it prints is compared with the output block
the page shows after it (see :mod:`tests.docs.markdown` for what may differ).
The Spark pages' sessions and Python examples run in tests/analytics/test_docs.py
(with the Spark session of the analytics tests); their other blocks run here.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.analytics.docs_sessions import DOCUMENTS as SPARK_PAGES

from .markdown import Bindings, Block, blocks, compare, pages
from .shell import ROOT, Shell

PAGES = pages(ROOT)
BLOCKS = [block for page in PAGES for block in blocks(page, ROOT)]
#: The endpoint URL the examples use; the endpoint test gives them a server's real one.
ENDPOINT = "http://127.0.0.1:9324"
#: The PostgreSQL URL the examples use; the tests give them a database of their cluster.
POSTGRES = "postgresql://app@127.0.0.1:5432/queues"
#: Run in tests/analytics/test_docs.py (on the file their sessions write): the analytics sections'
#: sessions and Python examples.
SPARK = {str(page.relative_to(ROOT)) for page in SPARK_PAGES}


def _spark(block: Block) -> bool:
    return block.region == "analytics" or (block.page in SPARK and block.lang in ("python", "console"))


PYTHON = [
    b
    for b in BLOCKS
    if b.lang == "python" and ENDPOINT not in b.text and POSTGRES not in b.text and not _spark(b)
]
SESSIONS = [b for b in BLOCKS if b.lang == "console" and not _spark(b)]
WITH_POSTGRES = [b for b in BLOCKS if b.lang == "python" and POSTGRES in b.text]
SHELL_PAGES = sorted({b.page for b in BLOCKS if b.lang == "sh"})
ENDPOINT_PAGES = sorted({b.page for b in BLOCKS if b.region == "server"})
BIN = Path(sys.executable).parent


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DURABLEQ_", "AWS_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # durableq and aws of this environment
    return env


def _run_python(block: Block, folder: Path, text: str | None = None) -> str:
    folder.mkdir(exist_ok=True)
    (folder / "example.py").write_text(text or block.text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{block.label} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_pages_have_the_examples_this_module_runs() -> None:
    assert {"README.md", "docs/index.md", "docs/getting-started.md", "docs/cli.md"} <= {
        b.page for b in BLOCKS
    }
    assert len(PYTHON) >= 15
    assert {b.page for b in SESSIONS} >= {"README.md", "docs/cli.md"}
    assert {"README.md", "docs/guides/endpoint.md"} <= set(ENDPOINT_PAGES)
    assert len(WITH_POSTGRES) >= 2 and len(SHELL_PAGES) >= 5  # the one-line switch, the outbox
    assert all(b.output is not None for b in PYTHON if "print(" in b.text and "Worker(" not in b.text)
    # Every block is run by some test: a language no test runs is an example that could rot.
    shown = {"text", "python", "console", "sh"}
    assert {b.lang for b in BLOCKS} <= shown, {b.label: b.lang for b in BLOCKS if b.lang not in shown}


@pytest.mark.parametrize("block", PYTHON, ids=[b.label for b in PYTHON])
def test_a_python_example(block: Block, tmp_path: Path) -> None:
    printed = _run_python(block, tmp_path)
    if block.output is not None:
        compare(
            block.output.text,
            printed,
            Bindings(),
            excerpt=block.output.output_of_previous == "excerpt",
            what=block.label,
        )


@pytest.mark.parametrize("session", SESSIONS, ids=[b.label for b in SESSIONS])
def test_a_command_line_session(session: Block, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    bindings = Bindings()
    steps = session.text.split("\n$ ")
    assert steps[0].startswith("$ ")
    for step in [steps[0][2:], *steps[1:]]:
        command, _, shown = step.partition("\n")
        what = f"{session.label}: $ {command}"
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", bindings.substitute(command)],
            cwd=tmp_path,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{what}: exit status {done.returncode}\n{done.stderr}"
        assert done.stderr == "", f"{what}: {done.stderr}"
        compare(shown, done.stdout, bindings, what=what)
    assert len(bindings) >= 2  # the ids and receipt handles the session reuses were bound


@pytest.mark.parametrize("block", WITH_POSTGRES, ids=[b.label for b in WITH_POSTGRES])
def test_a_postgresql_example(block: Block, tmp_path: Path, pg_url: str) -> None:
    printed = _run_python(block, tmp_path, block.text.replace(POSTGRES, pg_url))
    assert block.output is not None
    compare(block.output.text, printed, Bindings(), what=block.label)


@pytest.mark.slow
@pytest.mark.parametrize("page", SHELL_PAGES)
def test_the_shell_examples_of_a_page(page: str, tmp_path: Path, sample_db: Path, pg_url: str) -> None:
    """The ``sh`` blocks of one page, in order, in one folder (an ``export`` holds for the blocks after)."""
    shell = Shell(tmp_path, sample_db, {POSTGRES: pg_url})
    for block in BLOCKS:
        if block.lang != "sh" or block.page != page:
            continue
        printed = shell.run(block)
        if block.output is not None:
            compare(
                block.output.text,
                printed,
                Bindings(),
                excerpt=block.output.output_of_previous == "excerpt",
                what=block.label,
            )


@pytest.mark.slow
@pytest.mark.parametrize("page", ENDPOINT_PAGES)
def test_the_endpoint_examples(page: str, tmp_path: Path) -> None:
    section = [b for b in BLOCKS if b.page == page and b.region == "server" and b.lang in ("sh", "python")]
    [serve] = [b for b in section if b.lang == "sh" and "durableq" in b.text and " serve" in b.text]
    [with_boto3] = [b for b in section if b.lang == "python" and ENDPOINT in b.text]
    [with_aws] = [b for b in section if b.lang == "sh" and b.text.lstrip().startswith("export")]
    command, _, announced = serve.text.strip().partition("#")
    server = subprocess.Popen(
        [*shlex.split(command), "--port", "0"],  # the page's command, on a free port
        cwd=tmp_path,
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url = line.rsplit(" ", 1)[-1].strip()
        assert line.strip() == announced.strip().replace(ENDPOINT, url)
        printed = _run_python(with_boto3, tmp_path / "boto3", with_boto3.text.replace(ENDPOINT, url))
        assert with_boto3.output is not None
        compare(with_boto3.output.text, printed, Bindings(), what=with_boto3.label)
        env = _environment()
        received = ""
        for text in with_aws.text.strip().splitlines():
            words = shlex.split(text.replace(ENDPOINT, url), comments=True)
            if words[0] == "export":
                env.update(word.split("=", 1) for word in words[1:])
                continue
            done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"{with_aws.label}: {text}\n{done.stderr}"
            received = done.stdout
        [message] = json.loads(received)["Messages"]  # the last command receives what the one before sent
        assert message["Body"] == "hello"
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=60)
    assert server.returncode == 0, errors
