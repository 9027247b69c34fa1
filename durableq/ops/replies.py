"""Request-response: a request names its reply queue and a correlation id in two message
attributes; a reply goes to that queue with the same correlation id, in the same transaction as the
delete of its request, so a responder killed after its handler returned leaves either both (the
reply sent, the request gone) or neither (the request comes back and is handled again)."""

from __future__ import annotations

from collections.abc import Mapping

from ..engines.base import Connection
from ..errors import DurableQError, InvalidParameterValue
from ..types import Attribute, AttributeInput, Message, SendResult
from . import send, visibility
from .counters import Counters
from .queue_rows import Catalog, find
from .sealing import Sealer

#: The attribute that names the queue a reply goes to.
REPLY_TO = "DurableQ.ReplyTo"
#: The attribute a reply carries back to match it with its request.
CORRELATION_ID = "DurableQ.CorrelationId"


def reply_address(message: Message) -> tuple[str, str]:
    """The reply queue and correlation id of a request (InvalidParameterValue if it is not one)."""
    reply_to, correlation = message.attributes.get(REPLY_TO), message.attributes.get(CORRELATION_ID)
    if reply_to is None or correlation is None or not isinstance(reply_to.value, str):
        raise InvalidParameterValue(
            f"message {message.message_id} is not a request: it has no {REPLY_TO} and {CORRELATION_ID} "
            "attributes (send requests with durableq.rpc.Requester)"
        )
    return reply_to.value, str(correlation.value)


def respond(
    conn: Connection,
    catalog: Catalog,
    request_queue: str,
    request: Message,
    reply: send.Outgoing,
    now: int,
    counters: Counters,
    sealer: Sealer,
) -> SendResult | None:
    """In the caller's write transaction: send ``reply`` to the request's reply queue and delete the
    request.  None if the reply queue is gone (its requester left): the request is deleted anyway."""
    reply_to, _ = reply_address(request)
    target = find(conn, reply_to)
    result = None
    if target is not None:
        (outcome,) = send.insert(conn, target, [reply], now, counters, sealer)
        if isinstance(outcome, DurableQError):
            raise outcome
        result = outcome
    visibility.delete(conn, catalog, request_queue, request.receipt_handle, now, counters)
    return result


def reply_attributes(
    request: Message, extra: Mapping[str, AttributeInput] | None
) -> dict[str, AttributeInput]:
    """A reply's attributes: the caller's, and the request's correlation id."""
    _, correlation = reply_address(request)
    return {**(extra or {}), CORRELATION_ID: Attribute("String", correlation)}
