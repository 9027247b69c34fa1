"""``durableq dashboard``: the web dashboard of the database, until Ctrl-C."""

from __future__ import annotations

import json

import click

from durableq import dashboard as dashboards
from durableq import limits
from durableq.engines.urls import redacted

from .base import CommandFailed, db_location, settings
from .output import json_option
from .serve import bind_failure


@click.command()
@click.option("--host", default=limits.DASHBOARD_HOST, show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65_535),
    default=limits.DASHBOARD_PORT,
    show_default=True,
    help="Port to listen on (0: a free one).",
)
@click.option(
    "--token",
    envvar="DURABLEQ_DASHBOARD_TOKEN",
    help="The access token, at least 16 printable ASCII characters (default: a new random one each "
    "start). Also $DURABLEQ_DASHBOARD_TOKEN.",
)
@click.option("--show-bodies", is_flag=True, help="Show message bodies (by default only their metadata).")
@json_option
def dashboard(host: str, port: int, token: str | None, show_bodies: bool, as_json: bool) -> None:
    """Serve a web dashboard of the database until Ctrl-C.

    Prints its address with an access token, as Jupyter does; a request
    without the token gets 401, whatever the address. Shows every queue's
    depth (live), a queue's charts, settings and waiting messages, a
    message's history, the audit trail, and redrive and purge behind a
    confirmation. Needs the dashboard extra: pip install 'durableq[dashboard]'.

    \b
      durableq dashboard
      durableq dashboard --port 9000 --show-bodies
    """

    def ready(running: dashboards.Dashboard) -> None:
        if as_json:
            click.echo(json.dumps({"url": running.url, "db": redacted(db_location())}))
        else:
            click.echo(f"durableq: dashboard of {redacted(db_location())} at {running.url}")

    given = settings()
    try:
        dashboards.run(
            db_location(),
            on_ready=ready,
            host=host,
            port=port,
            token=token,
            show_bodies=show_bodies,
            keyring=given.keyring,
            payload_dir=given.payload_dir,
            schema=given.schema,
        )
    except ImportError as exc:  # the dashboard extra is missing: its message says how to install it
        raise CommandFailed("DashboardExtraMissing", str(exc)) from exc
    except OSError as exc:
        raise CommandFailed("InvalidParameterValue", bind_failure(exc, host, port)) from exc


COMMANDS = [dashboard]
