"""``durableq call``: one request-response round trip (``durableq.rpc``) from the command line."""

from __future__ import annotations

import sys

import click

from durableq import limits
from durableq.rpc import Requester
from durableq.types import AttributeInput

from .base import open_broker
from .output import emit, json_option, message_json
from .parsing import ATTRIBUTE, check_range


@click.command()
@click.argument("queue")
@click.argument("body", required=False)
@click.option(
    "--timeout",
    type=float,
    default=limits.DEFAULT_CALL_TIMEOUT,
    show_default=True,
    help=f"Seconds to wait for the reply, 0-{limits.MAX_CALL_TIMEOUT:g}.",
)
@click.option(
    "--attr",
    "attrs",
    multiple=True,
    type=ATTRIBUTE,
    help="An attribute of the request: NAME=VALUE or NAME:TYPE=VALUE (as for `send`). Repeatable.",
)
@json_option
def call(
    queue: str,
    body: str | None,
    timeout: float,
    attrs: tuple[tuple[str, AttributeInput], ...],
    as_json: bool,
) -> None:
    """Send BODY (or stdin) as a request to QUEUE and print the reply's body.

    The request names a reply queue made for this call (a temporary queue,
    deleted afterwards) and a correlation id; whoever answers QUEUE
    (`durableq.rpc.Responder`, or `durableq worker --respond`) sends the reply
    there. No reply within --timeout: error RequestTimeout, exit 1.

    \b
      durableq call resize "photo 7" --timeout 10
    """
    check_range("--timeout", timeout, 0, limits.MAX_CALL_TIMEOUT, "seconds")
    text = sys.stdin.read() if body is None else body
    with Requester(open_broker(), queue) as requester:
        reply = requester.call(text, attributes=dict(attrs) or None, timeout=timeout)
    # The reply is a received message: --json prints it as `receive --json` does.
    emit(as_json, message_json(reply), reply.body)


COMMANDS = [call]
