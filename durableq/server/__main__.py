"""``python -m durableq.server --db PATH [options]``: the endpoint without the CLI (what its tests start).

It takes the options of ``durableq serve`` (``options.py`` declares them for both), and the database,
keyring and payload folder that the CLI takes before its commands.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from durableq.errors import DurableQError
from durableq.text import printable

from . import logs, run
from .options import EndpointOptions, endpoint_options

PROG = "python -m durableq.server"


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--db", required=True, metavar="FILE|URL", help="The durableq database: a SQLite file or a URL."
)
@click.option(
    "--keyring",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keyring file with the master keys of encrypted queues.",
)
@click.option(
    "--payload-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The payload store of large payloads (default: DB.payloads beside a SQLite file).",
)
@click.option("--schema", help="PostgreSQL: the schema of durableq's tables (default: durableq).")
@endpoint_options(log_level="warning")
def main(
    db: str, keyring: Path | None, payload_dir: Path | None, schema: str | None, endpoint: EndpointOptions
) -> None:
    """Serve the durableq database DB as an SQS endpoint until SIGINT or SIGTERM."""
    logs.configure(endpoint.log_level, endpoint.log_format)
    try:
        run(db, keyring=keyring, payload_dir=payload_dir, schema=schema, **endpoint.serving())
    except (ValueError, OSError, DurableQError) as exc:  # refused at start (credentials, port, file)
        click.echo(f"{PROG}: error: {printable(exc)}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main(prog_name=PROG)
