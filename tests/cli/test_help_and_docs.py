"""Every command has help text, --json, and a place in the CLI reference of the docs (docs/cli.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from durableq.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        yield " ".join((*path, name)), command
        if isinstance(command, click.Group):
            yield from _walk(command, (*path, name))


COMMANDS = list(_walk(main))
LEAVES = [(path, command) for path, command in COMMANDS if not isinstance(command, click.Group)]


def _cli_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text[text.index("<!-- cli:start -->") : text.index("<!-- cli:end -->")]


def _long_options(command: click.Command) -> list[str]:
    return [opt for param in command.params for opt in param.opts if opt.startswith("--")]


def test_the_walk_finds_the_command_tree() -> None:
    paths = {path for path, _ in COMMANDS}
    assert {
        "init", "db upgrade", "db current", "db history",
        "queue create", "queue list", "queue show", "queue set", "queue delete", "queue purge",
        "queue tags", "queue tag", "queue untag",
        "send", "receive", "delete", "change-visibility", "peek",
        "stats", "redrive", "moves list", "moves cancel",
    } <= paths  # fmt: skip


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[path for path, _ in COMMANDS])
def test_every_command_has_help(path: str, command: click.Command) -> None:
    assert command.help and command.help.strip(), f"`durableq {path}` has no help text"
    result = CliRunner().invoke(main, [*path.split(), "--help"])
    assert result.exit_code == 0
    first_line = command.help.strip().splitlines()[0]
    assert " ".join(first_line.split()) in " ".join(result.output.split())


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=[path for path, _ in LEAVES])
def test_every_command_has_json(path: str, command: click.Command) -> None:
    assert "--json" in _long_options(command), f"`durableq {path}` has no --json"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[path for path, _ in COMMANDS])
def test_every_command_and_option_is_in_the_docs(path: str, command: click.Command) -> None:
    section = _cli_section()
    assert re.search(rf"durableq {re.escape(path)}(?![\w-])", section), f"docs/cli.md lacks `durableq {path}`"
    for option in _long_options(command):
        assert option in section, f"docs/cli.md lacks {option} of `durableq {path}`"


def test_the_docs_document_the_conventions() -> None:
    section = _cli_section()
    for word in ("# Command line", "--db", "DURABLEQ_DB", "--json", "--version", "Exit status"):
        assert word in section
    for option in _long_options(main):
        assert option in section
