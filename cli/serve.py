"""``durableq serve``: the SQS-compatible endpoint, for boto3, the AWS CLI and other SDKs."""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import click

from durableq import server
from durableq.engines.urls import redacted
from durableq.server import logs

from .base import CommandFailed, db_location, settings
from .output import json_option

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@click.option(
    "--host",
    default=server.DEFAULT_HOST,
    show_default=True,
    help="Address to listen on; anything but 127.0.0.1 opens the queues to the network (use --credentials).",
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
    type=_FILE,
    help="File of `ACCESS_KEY_ID SECRET` lines; requests must then carry a valid SigV4 signature.",
)
@click.option("--tls-cert", type=_FILE, help="PEM certificate: serve HTTPS (with --tls-key).")
@click.option("--tls-key", type=_FILE, help="PEM private key of --tls-cert.")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Another name clients may use in the Host header (repeatable; '*' for any, e.g. behind a proxy). "
    "IP addresses, localhost and the --host name are always allowed.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="Log level; at info, one access line per request.",
)
@click.option(
    "--log-format",
    type=click.Choice(logs.LOG_FORMATS),
    default="text",
    show_default=True,
    help="Log lines on stderr as text or as JSON objects.",
)
@json_option
def serve(
    host: str,
    port: int,
    region: str,
    account_id: str,
    credentials: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    allow_hosts: tuple[str, ...],
    log_level: str,
    log_format: str,
    as_json: bool,
) -> None:
    """Serve the database as an SQS endpoint until Ctrl-C.

    Speaks AWS JSON 1.0 and the query protocol, and creates the database
    file if there is none. Prints the URL to point clients at (with --json,
    as {"url": ..., "db": ...}). Requests from web browsers are refused.
    Needs the server extra: pip install 'durableq[server]'.

    \b
      durableq serve --port 9324
      aws --endpoint-url http://127.0.0.1:9324 sqs list-queues
    """
    if (tls_cert is None) != (tls_key is None):
        raise CommandFailed("InvalidParameterValue", "give both --tls-cert and --tls-key, or neither")
    try:
        keys = None if credentials is None else server.load_credentials(credentials)
    except ValueError as exc:
        raise CommandFailed("InvalidParameterValue", str(exc)) from exc

    def ready(running: server.Server) -> None:
        if as_json:
            click.echo(json.dumps({"url": running.url, "db": redacted(running.db)}))
        else:
            server.announce(running)

    root, ours = logging.getLogger(), logging.getLogger("durableq")
    levels = root.level, ours.level
    output = logs.configure(log_level, log_format)
    try:
        server.run(
            db_location(),
            host=host,
            port=port,
            region=region,
            account_id=account_id,
            credentials=keys,
            tls_cert=tls_cert,
            tls_key=tls_key,
            allow_hosts=allow_hosts,
            keyring=settings().keyring,  # the root options: encrypted queues need the keyring here too
            payload_dir=settings().payload_dir,
            schema=settings().schema,
            on_ready=ready,
        )
    except ImportError as exc:  # the server extra is missing: its message says how to install it
        raise CommandFailed("ServerExtraMissing", str(exc)) from exc
    except OSError as exc:
        raise CommandFailed("InvalidParameterValue", _bind_failure(exc, host, port)) from exc
    finally:  # leave logging as it was (this matters when the CLI runs inside another program)
        root.removeHandler(output)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])


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
