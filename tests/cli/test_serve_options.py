"""`durableq serve` and `python -m durableq.server` take one set of endpoint options, declared once
(``durableq.server.options``): an option added to one is on the other."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner
from durableq.cli import main

from tests.cli.test_executable import _executable

#: What only the module has: the CLI takes them before the command, for every command.
ROOT_OPTIONS = {"--db", "--keyring", "--payload-dir", "--schema"}


def _options(command: click.Command) -> dict[str, tuple[str | None, object]]:
    """Each option of ``command``: its help and default."""
    return {
        name: (param.help, param.default)
        for param in command.params
        if isinstance(param, click.Option)
        for name in param.opts
    }


def test_serve_and_the_server_module_take_the_same_options() -> None:
    from durableq.server.__main__ import main as module

    assert isinstance(module, click.Command)  # not a parser of its own
    serve = main.commands["serve"]
    ours, its = _options(serve), _options(module)
    assert set(its) - set(ours) == ROOT_OPTIONS
    assert set(ours) - set(its) == {"--json", "--ephemeral"}  # the module serves the --db it is given
    assert {"--durability", "--loop", "--host", "--port", "--credentials"} <= set(ours)
    for name in set(ours) & set(its) - {"--log-level"}:  # the module logs less by default (tests, benches)
        assert ours[name] == its[name], name


def test_serve_takes_durability(tmp_path: Path) -> None:
    refused = CliRunner().invoke(main, ["--db", str(tmp_path / "q.db"), "serve", "--durability", "fast"])
    assert refused.exit_code == 2 and "'fast' is not one of 'full', 'normal'" in refused.stderr
    serving = subprocess.Popen(
        [
            _executable(),
            "--db",
            str(tmp_path / "q.db"),
            "serve",
            "--port",
            "0",
            "--durability",
            "normal",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serving.stdout is not None
        ready = json.loads(serving.stdout.readline())
        assert ready["url"].startswith("http://127.0.0.1:")
        serving.send_signal(signal.SIGTERM)
        assert serving.wait(timeout=60) == 0
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()


def test_the_server_module_says_what_it_takes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "durableq.server", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Usage: python -m durableq.server [OPTIONS]" in result.stdout
    assert "--durability" in result.stdout and "--allow-host" in result.stdout
