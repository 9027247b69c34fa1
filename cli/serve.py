"""``durableq serve``: the SQS-compatible endpoint, for boto3, the AWS CLI and other SDKs."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
from collections.abc import Iterator

import click

from durableq import server
from durableq.engines.urls import redacted
from durableq.server import logs
from durableq.server.ephemeral import temporary_database
from durableq.server.options import EndpointOptions, endpoint_options

from .base import CommandFailed, db_location, settings
from .output import json_option


@click.command()
@endpoint_options(log_level="info")
@click.option(
    "--ephemeral",
    is_flag=True,
    help="Serve a new database in a temporary folder, removed (with every message) when the endpoint "
    "stops, also on Ctrl-C or SIGTERM. Not with --db.",
)
@json_option
def serve(endpoint: EndpointOptions, ephemeral: bool, as_json: bool) -> None:
    """Serve the database as an SQS endpoint until Ctrl-C.

    Speaks AWS JSON 1.0 and the query protocol, and creates the database
    file if there is none. Prints the URL to point clients at (with --json,
    as {"url": ..., "db": ...}). Requests from web browsers are refused.
    Needs the server extra: pip install 'durableq[server]'.

    \b
      durableq serve --port 9324
      durableq serve --ephemeral      # for local development: nothing kept
      aws --endpoint-url http://127.0.0.1:9324 sqs list-queues
    """
    if (endpoint.tls_cert is None) != (endpoint.tls_key is None):
        raise CommandFailed("InvalidParameterValue", "give both --tls-cert and --tls-key, or neither")
    try:
        keys = None if endpoint.credentials is None else server.load_credentials(endpoint.credentials)
    except ValueError as exc:
        raise CommandFailed("InvalidParameterValue", str(exc)) from exc

    def ready(running: server.Server) -> None:
        if as_json:
            click.echo(json.dumps({"url": running.url, "db": redacted(running.db)}))
        else:
            server.announce(running)

    root, ours = logging.getLogger(), logging.getLogger("durableq")
    levels = root.level, ours.level
    output = logs.configure(endpoint.log_level, endpoint.log_format)
    try:
        with _database(ephemeral) as db:
            server.run(
                db,
                **{
                    **endpoint.serving(),
                    "credentials": keys,
                },  # loaded above, to say what is wrong in one line
                keyring=settings().keyring,  # the root options: encrypted queues need the keyring here too
                payload_dir=None if ephemeral else settings().payload_dir,
                schema=settings().schema,
                on_ready=ready,
            )
    except ImportError as exc:  # the server extra is missing: its message says how to install it
        raise CommandFailed("ServerExtraMissing", str(exc)) from exc
    except OSError as exc:
        raise CommandFailed("InvalidParameterValue", bind_failure(exc, endpoint.host, endpoint.port)) from exc
    finally:  # leave logging as it was (this matters when the CLI runs inside another program)
        root.removeHandler(output)
        root.setLevel(levels[0])
        ours.setLevel(levels[1])


@contextlib.contextmanager
def _database(ephemeral: bool) -> Iterator[str]:
    """The database to serve: the root options', or with ``--ephemeral`` a temporary one, removed
    when the block ends (``server.run`` returns normally on SIGINT and SIGTERM)."""
    if not ephemeral:
        yield db_location()
        return
    source = click.get_current_context().find_root().get_parameter_source("db_file")
    if source in (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT):
        raise CommandFailed(
            "InvalidParameterValue",
            "--ephemeral serves a new temporary database; give it or --db (or DURABLEQ_DB), not both",
        )
    with temporary_database(prefix="durableq-serve-") as path:
        yield str(path)


_OTHER_PORT = "pass another --port (0 picks a free one)"


def bind_failure(exc: OSError, host: str, port: int) -> str:
    """Why the address could not be taken, naming it and the option that changes it."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use (another program listens there); {_OTHER_PORT}"
    if exc.errno == errno.EACCES:
        return f"not allowed to listen on port {port} (ports below 1024 need privileges); {_OTHER_PORT}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine; pass another --host"
    raise exc  # not about the address: the root group reports it


COMMANDS = [serve]
