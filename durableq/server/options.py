"""The endpoint's options, declared once: ``durableq serve`` and ``python -m durableq.server`` both
take them (the CLI's own root options, ``--db``, ``--keyring`` and ``--payload-dir``, come before
its commands; the module declares those three itself)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from durableq import limits

from . import DEFAULT_ACCOUNT_ID, DEFAULT_HOST, DEFAULT_PORT, DEFAULT_REGION, LOOPS, logs

F = TypeVar("F", bound=Callable[..., Any])

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
#: The levels ``--log-level`` takes.
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """What the options said, whole: :meth:`serving` gives :func:`durableq.server.serve`'s keywords."""

    host: str
    port: int
    region: str
    account_id: str
    credentials: Path | None
    durability: str
    tls_cert: Path | None
    tls_key: Path | None
    allow_hosts: tuple[str, ...]
    loop: str
    log_level: str
    log_format: str

    def serving(self) -> dict[str, Any]:
        """The keywords of :func:`durableq.server.serve` (and ``run``); logging is the caller's."""
        return {
            "host": self.host,
            "port": self.port,
            "region": self.region,
            "account_id": self.account_id,
            "credentials": self.credentials,
            "durability": self.durability,
            "tls_cert": self.tls_cert,
            "tls_key": self.tls_key,
            "allow_hosts": self.allow_hosts,
            "loop": self.loop,
        }


_OPTIONS = (
    click.option(
        "--host",
        default=DEFAULT_HOST,
        show_default=True,
        help="Address to listen on; anything but 127.0.0.1 opens the queues to the network "
        "(use --credentials).",
    ),
    click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=DEFAULT_PORT,
        show_default=True,
        help="Port to listen on (0 picks a free one; the URL is printed).",
    ),
    click.option("--region", default=DEFAULT_REGION, show_default=True, help="Region in queue ARNs."),
    click.option(
        "--account-id",
        default=DEFAULT_ACCOUNT_ID,
        show_default=True,
        help="Account id in queue URLs and ARNs.",
    ),
    click.option(
        "--credentials",
        type=_FILE,
        help="File of `ACCESS_KEY_ID SECRET` lines; requests must then carry a valid SigV4 signature.",
    ),
    click.option(
        "--durability",
        type=click.Choice(limits.DURABILITY_LEVELS),
        default=limits.DEFAULT_DURABILITY,
        show_default=True,
        help="full: a send is on disk before it is answered (fsync); normal: it survives a crash of the "
        "server's process, not a power loss.",
    ),
    click.option("--tls-cert", type=_FILE, help="PEM certificate: serve HTTPS (with --tls-key)."),
    click.option("--tls-key", type=_FILE, help="PEM private key of --tls-cert."),
    click.option(
        "--allow-host",
        "allow_hosts",
        multiple=True,
        metavar="NAME",
        help="Another name clients may use in the Host header (repeatable; '*' for any, e.g. behind a "
        "proxy). IP addresses, localhost and the --host name are always allowed.",
    ),
    click.option(
        "--loop",
        type=click.Choice(LOOPS),
        default="auto",
        show_default=True,
        help="The event loop (auto: uvloop when installed).",
    ),
)


def endpoint_options(*, log_level: str) -> Callable[[F], F]:
    """Add the endpoint's options to a click command, which gets them whole as ``endpoint``
    (an :class:`EndpointOptions`).  ``log_level``: the default of ``--log-level`` (the CLI says
    ``info``, one access line per request; the module, run by tests and benchmarks, ``warning``)."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            given = {field.name: kwargs.pop(field.name) for field in dataclasses.fields(EndpointOptions)}
            return command(*args, endpoint=EndpointOptions(**given), **kwargs)

        for option in reversed(
            (
                *_OPTIONS,
                click.option(
                    "--log-level",
                    type=click.Choice(LOG_LEVELS, case_sensitive=False),
                    default=log_level,
                    show_default=True,
                    help="Log level; at info, one access line per request.",
                ),
                click.option(
                    "--log-format",
                    type=click.Choice(logs.LOG_FORMATS),
                    default="text",
                    show_default=True,
                    help="Log lines on stderr as text or as JSON objects.",
                ),
            )
        ):
            run = option(run)
        return run  # type: ignore[return-value]

    return decorate
