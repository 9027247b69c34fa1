"""The durableq command line, installed as ``durableq.cli``; the console script runs :func:`main`.

Commands live in modules by topic, each listing its top-level commands in
``COMMANDS``; :data:`COMMAND_MODULES` says which modules make up the CLI.
A new topic (the worker, analytics) is a new module with a ``COMMANDS``
list, added to that tuple. Every command runs inside :class:`base.DurableQGroup`,
which turns errors into one line and an exit status.
"""

from __future__ import annotations

from pathlib import Path

import click

import durableq

from . import (
    analytics,
    dashboard,
    db,
    events,
    keys,
    message_commands,
    queues,
    redrive,
    rpc,
    schedules,
    send,
    serve,
    stats,
    worker,
)
from .base import DurableQGroup, Settings

DEFAULT_DB = "durableq.db"
#: The modules whose ``COMMANDS`` make up the command line, in the order help lists them.
COMMAND_MODULES = (
    db,
    queues,
    keys,
    send,
    message_commands,
    stats,
    redrive,
    worker,
    schedules,
    rpc,
    analytics,
    events,
    serve,
    dashboard,
)


@click.group(
    cls=DurableQGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--db",
    "db_file",
    metavar="FILE|URL",
    envvar="DURABLEQ_DB",
    default=DEFAULT_DB,
    show_default=True,
    show_envvar=True,
    help="The durableq database: a SQLite file, or a postgresql://user@host/db URL.",
)
@click.option(
    "--keyring",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="DURABLEQ_KEYRING",
    show_envvar=True,
    help="The keyring file with the master keys of encrypted queues (`durableq keys`).",
)
@click.option(
    "--payload-dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="DURABLEQ_PAYLOAD_DIR",
    show_envvar=True,
    help="The folder of large payloads stored outside the database file (default: DB.payloads beside it); "
    "a folder of its own, private to you (mode 700).",
)
@click.option(
    "--schema",
    metavar="NAME",
    envvar="DURABLEQ_SCHEMA",
    show_envvar=True,
    help="PostgreSQL only: the schema of durableq's tables (default: durableq); two schemas of one "
    "database are two separate durableq installations.",
)
@click.version_option(durableq.__version__, prog_name="durableq")
@click.pass_context
def main(
    ctx: click.Context, db_file: str, keyring: Path | None, payload_dir: Path | None, schema: str | None
) -> None:
    """Operate and inspect durableq queues from the shell.

    Every command that prints has --json for scripts. Exit status: 0 done,
    1 refused (one `error: CODE: message` line on stderr), 2 bad usage,
    130 stopped by Ctrl-C.

    \b
      durableq init
      durableq queue create jobs
      durableq send jobs 'hello'
      durableq receive jobs --delete
      durableq stats --watch
    """
    ctx.obj = Settings(db=db_file, keyring=keyring, payload_dir=payload_dir, schema=schema)


for _module in COMMAND_MODULES:
    for _command in _module.COMMANDS:
        main.add_command(_command)

__all__ = ["COMMAND_MODULES", "main"]
