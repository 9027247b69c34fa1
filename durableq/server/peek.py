"""The developer's peek: ``GET /_aws/sqs/messages?QueueUrl=...``, in the shape LocalStack answers it.

It shows a queue's messages without receiving them (``Queue.peek``): no receipt handle is made,
no visibility or receive count changes.  As LocalStack's, it shows the visible messages, and with
``ShowInvisible=true`` / ``ShowDelayed=true`` those in flight and delayed too; each message
carries the system attributes ``IsVisible`` and ``IsDelayed`` and the receipt handle
``SQS/BACKDOOR/ACCESS``, which nothing accepts.  The answer is the query protocol's
``ReceiveMessageResponse`` in XML, or with ``Accept: application/json`` the same document in JSON.

Whoever can peek reads every message, in flight or not: the endpoint answers it to a client on
the loopback interface, or, when it has credentials, to a request signed with them.
"""

from __future__ import annotations

import ipaddress
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qs

import durableq
from durableq import limits
from durableq.types import md5_hex

from . import protocol_query, sigv4
from .dispatch import Dispatcher
from .errors import WireError
from .message_format import attribute_out
from .urls import queue_name
from .wire import Request, Response

PEEK_PATH = "/_aws/sqs/messages"
#: The receipt handle peeked messages carry (LocalStack's): no call accepts it.
RECEIPT_HANDLE = "SQS/BACKDOOR/ACCESS"


def answer(dispatcher: Dispatcher, request: Request, client_host: str | None) -> Response:
    """The answer to a peek request (run in the pool: it reads the database)."""
    _check_allowed(dispatcher, request, client_host)
    query = parse_qs(request.query, keep_blank_values=True)
    url = (query.get("QueueUrl") or [""])[0]
    if not url:
        raise WireError("MissingParameter", "The request must contain the parameter QueueUrl.")
    states = ["visible"]
    if _flag(query, "ShowInvisible"):
        states.append("in_flight")
    if _flag(query, "ShowDelayed"):
        states.append("delayed")
    endpoint = dispatcher.endpoint(request, {"QueueUrl": url})
    queue = dispatcher.broker.get_queue(endpoint.library_name(queue_name(url)))
    peeked = [m for state in states for m in queue.peek(state=state, limit=limits.MAX_PEEK)]
    peeked.sort(key=lambda m: (m.sent_timestamp, m.sequence_number or "", m.message_id))
    messages = [_message(m, dispatcher.account_id) for m in peeked]
    request_id = str(uuid.uuid4())
    if "application/json" not in request.headers.get("Accept", ""):
        return protocol_query.result("ReceiveMessage", {"Messages": messages}, request_id)
    document = {
        "ReceiveMessageResponse": {
            "ReceiveMessageResult": {"Message": [_as_query_json(m) for m in messages]},
            "ResponseMetadata": {"RequestId": request_id},
        }
    }
    body = json.dumps(document).encode()
    return Response(200, body, {"Content-Type": "application/json", "x-amzn-RequestId": request_id})


def _check_allowed(dispatcher: Dispatcher, request: Request, client_host: str | None) -> None:
    if dispatcher.credentials is not None:
        sigv4.verify(request, dispatcher.credentials, time.time())
        return
    try:
        loopback = client_host is not None and ipaddress.ip_address(client_host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise WireError(
            "AccessDenied",
            f"{PEEK_PATH} shows every message of a queue: it answers clients on the loopback interface, "
            "or requests signed with the endpoint's --credentials",
            status=403,
        )


def _flag(query: dict[str, list[str]], name: str) -> bool:
    value = (query.get(name) or ["false"])[0].lower()
    if value not in ("true", "false"):
        raise WireError("InvalidParameterValue", f"{name} must be true or false; got {value[:20]!r}")
    return value == "true"


def _message(message: durableq.PeekedMessage, account_id: str) -> dict[str, Any]:
    attributes = {
        "SenderId": account_id,
        "SentTimestamp": message.sent_timestamp,
        "ApproximateReceiveCount": message.receive_count,
        "ApproximateFirstReceiveTimestamp": message.first_receive_timestamp,
        "MessageGroupId": message.group_id,
        "MessageDeduplicationId": message.deduplication_id,
        "SequenceNumber": message.sequence_number,
        "IsVisible": "true" if message.state == "visible" else "false",
        "IsDelayed": "true" if message.state == "delayed" else "false",
    }
    shown: dict[str, Any] = {"MessageId": message.message_id, "ReceiptHandle": RECEIPT_HANDLE}
    if message.body is not None:  # None: a payload stored outside, or a key this endpoint lacks
        shown["MD5OfBody"] = md5_hex(message.body)
        shown["Body"] = message.body
    shown["Attributes"] = {name: str(value) for name, value in attributes.items() if value is not None}
    if message.attributes:
        shown["MessageAttributes"] = {name: attribute_out(a) for name, a in message.attributes.items()}
    return shown


def _as_query_json(message: dict[str, Any]) -> dict[str, Any]:
    """A message as the query protocol's XML names it, in JSON (LocalStack's JSON answer)."""
    shown = {k: v for k, v in message.items() if k not in ("Attributes", "MessageAttributes")}
    shown["Attribute"] = [{"Name": k, "Value": v} for k, v in message["Attributes"].items()]
    if "MessageAttributes" in message:
        shown["MessageAttribute"] = [{"Name": k, "Value": v} for k, v in message["MessageAttributes"].items()]
    return shown


__all__ = ["PEEK_PATH", "RECEIPT_HANDLE", "answer"]
