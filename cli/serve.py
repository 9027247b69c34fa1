"""``durableq serve``: the SQS-compatible endpoint, for boto3, the AWS CLI and other SDKs."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import click

from durableq import server

from .base import CommandFailed, db_path
from .output import json_option


@click.command()
@click.option(
    "--host",
    default=server.DEFAULT_HOST,
    show_default=True,
    help="Address to listen on; anything but 127.0.0.1 opens the queues to the network.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=server.DEFAULT_PORT,
    show_default=True,
    help="Port to listen on (0 picks a free one; the URL is printed).",
)
@click.option("--region", default=server.DEFAULT_REGION, show_default=True, help="Region in queue ARNs.")
@click.option(
    "--account-id",
    default=server.DEFAULT_ACCOUNT_ID,
    show_default=True,
    help="Account id in queue URLs and ARNs.",
)
@click.option(
    "--credentials",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File of `ACCESS_KEY_ID SECRET` lines; requests must then carry a valid SigV4 signature.",
)
@json_option
def serve(
    host: str, port: int, region: str, account_id: str, credentials: Path | None, as_json: bool
) -> None:
    """Serve the database as an SQS endpoint until Ctrl-C.

    Speaks AWS JSON 1.0 and the query protocol, and creates the database
    file if there is none. Prints the URL to point clients at (with --json,
    as {"url": ..., "db": ...}):

    \b
      durableq serve --port 9324
      aws --endpoint-url http://127.0.0.1:9324 sqs list-queues
    """
    try:
        keys = None if credentials is None else server.load_credentials(credentials)
    except ValueError as exc:
        raise CommandFailed("InvalidParameterValue", str(exc)) from exc

    def ready(running: server.Server) -> None:
        if as_json:
            click.echo(json.dumps({"url": running.url, "db": str(running.db)}))
        else:
            server.announce(running)

    try:
        server.run(
            db_path(),
            host=host,
            port=port,
            region=region,
            account_id=account_id,
            credentials=keys,
            on_ready=ready,
        )
    except OSError as exc:
        raise CommandFailed("InvalidParameterValue", _bind_failure(exc, host, port)) from exc


_OTHER_PORT = "pass another --port (0 picks a free one)"


def _bind_failure(exc: OSError, host: str, port: int) -> str:
    """Why the address could not be taken, naming it and the option that changes it."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use (another program listens there); {_OTHER_PORT}"
    if exc.errno == errno.EACCES:
        return f"not allowed to listen on port {port} (ports below 1024 need privileges); {_OTHER_PORT}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine; pass another --host"
    raise exc  # not about the address: the root group reports it


COMMANDS = [serve]
