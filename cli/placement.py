"""Where an option goes: the global options (``durableq --db FILE``) before the command, a command's
options after its name.  click only says "No such option"; this turns the two usual slips into a
line that shows the corrected command.

The global options are read from the root group's own parameters, so the list is declared once
(``cli/__init__.py``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

import click

from durableq.text import printable

#: The code of the line; the exit status stays click's for bad usage (2).
MISPLACED_OPTION = "MisplacedOption"


class MisplacedOption(click.UsageError):
    """An option on the wrong side of the command's name: one line with the command as it should be."""

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {MISPLACED_OPTION}: {printable(self.format_message())}", err=True)


def _option(command: click.Command, name: str) -> click.Option | None:
    """The option of ``command`` spelled ``name`` (``--db``), if it has one."""
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _takes_value(option: click.Option) -> bool:
    return not option.is_flag and not option.count


def _spelled(token: str, name: str) -> bool:
    return token == name or token.startswith(name + "=")


def _taken(args: Sequence[str], at: int, option: click.Option) -> int:
    """How many tokens the option at ``args[at]`` spans: its name and, if it takes one apart, its value."""
    return 2 if _takes_value(option) and "=" not in args[at] and at + 1 < len(args) else 1


def _command_path(
    root: click.Group, ctx: click.Context, args: Sequence[str]
) -> tuple[int, int, click.Command]:
    """Where the command's name starts and its path ends in ``args`` (``queue list``), and the
    command; the root's own options before it are skipped."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        option = _option(root, args[at].split("=", 1)[0])
        at += _taken(args, at, option) if option is not None else 1
    start = at
    command: click.Command = root
    while isinstance(command, click.Group) and at < len(args):
        found = command.get_command(ctx, args[at])
        if found is None:
            break
        command, at = found, at + 1
    return start, at, command


def global_option_after(root: click.Context, args: Sequence[str], name: str) -> MisplacedOption | None:
    """The hint for a command that refused ``name``, a global option given after it (``root``: the
    root group's context, ``args``: the whole command line)."""
    group = root.command
    assert isinstance(group, click.Group)
    option = _option(group, name)
    if option is None or option.is_eager:  # --help and --version mean something everywhere
        return None
    _, end, _ = _command_path(group, root, args)
    at = next((i for i in range(end, len(args)) if _spelled(args[i], name)), None)
    if at is None:
        return None
    moved = list(args[at : at + _taken(args, at, option)])
    rest = [*args[:at], *args[at + len(moved) :]]
    prog = root.info_name or "durableq"
    fixed = shlex.join([prog, *moved, *rest])
    return MisplacedOption(
        f"{name} is an option of {prog} itself; global options go before the command: {fixed}"
    )


def command_option_before(root: click.Context, args: Sequence[str], name: str) -> MisplacedOption | None:
    """The hint for ``name``, refused by the root group, an option of the command named after it."""
    group = root.command
    assert isinstance(group, click.Group)
    at = next((i for i, token in enumerate(args) if _spelled(token, name)), None)
    if at is None:
        return None
    prog = root.info_name or "durableq"
    # Whether a value goes with it depends on the command, which is known once it is taken out.
    for width in (2, 1):
        rest = [*args[:at], *args[at + width :]]
        start, end, command = _command_path(group, root, rest)
        option = _option(command, name) if command is not group else None
        if option is not None and _taken(args, at, option) == width:
            where = shlex.join([prog, *rest[start:end]])
            fixed = shlex.join([prog, *rest, *args[at : at + width]])
            return MisplacedOption(
                f"{name} is an option of {where}; a command's options go after its name: {fixed}"
            )
    return None
