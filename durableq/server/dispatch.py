"""From a request to an SQS answer: protocol, signature, action, library call, and every error mapped.

:meth:`Dispatcher.handle` runs in a pool thread (it calls the library).  A
``ReceiveMessage`` comes back as a :class:`PendingReceive`, which the event
loop awaits (``Queue.receive_async``): a long poll holds no thread while it
waits.
"""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import durableq
from durableq.errors import DurableQError
from durableq.ops.waiting_receive import WaitingReceive

from . import errors, guard, protocol_json, protocol_query, sigv4
from .actions import ACTIONS, Call, in_sqs_words
from .actions.message_actions import receive_request, received
from .message_format import ReceiveView
from .params import Params
from .urls import Endpoint, namespace, queue_name
from .wire import Request, Response, WireProtocol

#: Request ids in SQS's form (a UUID): a random one per process whose last 48 bits count on.  As
#: unique as a fresh ``uuid4()`` per request (which reads the OS's random source each time, a tenth
#: of the event loop's own time per request); ``next`` on a ``count`` is atomic in CPython.
_ID_BASE = uuid.uuid4().hex
_ID_HEAD = f"{_ID_BASE[:8]}-{_ID_BASE[8:12]}-{_ID_BASE[12:16]}-{_ID_BASE[16:20]}-"
_ID_COUNTER = itertools.count(int(_ID_BASE[20:], 16))


def new_request_id() -> str:
    """A request id: a UUID, different for every request of this process."""
    return f"{_ID_HEAD}{next(_ID_COUNTER) & 0xFFFF_FFFF_FFFF:012x}"


class Exchange:
    """One request as the access log tells it."""

    __slots__ = ("action", "code", "queue", "request_id", "status", "unanswered")

    def __init__(self) -> None:
        self.request_id = new_request_id()
        self.action = "-"
        self.queue = "-"
        self.status = 0
        self.code = ""
        #: What undoes the request if its answer reaches nobody (a ReceiveMessage's claim), or None.
        self.unanswered: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class PendingReceive:
    """A ReceiveMessage whose first look found nothing and which is to wait, on the event loop."""

    protocol: WireProtocol
    waiting: WaitingReceive
    view: ReceiveView
    request_id: str
    call: Call

    def respond(self, messages: list[durableq.Message]) -> Response:
        return self.protocol.result("ReceiveMessage", received(self.view, messages), self.request_id)

    def failed(self, exc: DurableQError) -> errors.WireError:
        """The SQS error for a library error of the awaited receive, in SQS's words."""
        return in_sqs_words("ReceiveMessage", self.call, exc)


def protocol_of(request: Request) -> WireProtocol:
    """AWS JSON 1.0 if the request says so, else the query protocol (from its headers alone)."""
    return protocol_json if protocol_json.handles(request) else protocol_query


class Dispatcher:
    """What every request needs: the broker, where queues live, and who may sign."""

    def __init__(
        self,
        broker: durableq.Broker,
        *,
        region: str,
        account_id: str,
        credentials: Mapping[str, str] | None,
        scheme: str,
        default_host: str,
    ) -> None:
        self.broker = broker
        self.region = region
        self.account_id = account_id
        # An empty mapping (serve() refuses one) would refuse every request here, never accept them all.
        self.credentials = None if credentials is None else dict(credentials)
        self.scheme = scheme
        self.default_host = default_host

    def handle(self, request: Request, exchange: Exchange) -> Response | PendingReceive:
        """The answer to one request, errors included; never raises (a pool thread runs it)."""
        protocol = protocol_of(request)
        try:
            return self._handle(request, protocol, exchange)
        except BaseException as exc:  # noqa: BLE001 - every error becomes an answer (see error())
            return error(protocol, exc, exchange)

    def _handle(
        self, request: Request, protocol: WireProtocol, exchange: Exchange
    ) -> Response | PendingReceive:
        if self.credentials is not None:
            sigv4.verify(request, self.credentials, time.time())
        action, members = protocol.parse(request)
        exchange.action = action[:64]
        guard.check_method(request.method, action)
        run = ACTIONS.get(action)
        if run is None:
            raise errors.unknown_action(action)
        if request.path.strip("/") and "QueueUrl" not in members:
            members["QueueUrl"] = request.path  # older SDKs post to the queue's URL instead
        exchange.queue = _queue_of(members)
        call = Call(self.broker, self.endpoint(request, members), Params(members))
        if action == "ReceiveMessage":
            # The first look here, in this pool thread: only a receive that is to wait goes back to the loop.
            try:
                queue, keywords, view = receive_request(call)
                first = queue.receive_or_wait(**keywords)
            except DurableQError as exc:
                raise in_sqs_words(action, call, exc) from exc
            if isinstance(first, list):  # as PendingReceive.respond answers
                answer = protocol.result(action, received(view, first), exchange.request_id)
                if first:  # the client may have gone while this look claimed: see SQSApp.serve_now
                    exchange.unanswered = functools.partial(
                        queue.put_back, first, attempt_id=keywords["attempt_id"]
                    )
                return answer
            return PendingReceive(protocol, first, view, exchange.request_id, call)
        return protocol.result(action, run(call), exchange.request_id)

    def endpoint(self, request: Request, members: Mapping[str, Any]) -> Endpoint:
        """How a request names queues: its namespace (see :func:`.urls.namespace`) and its host."""
        region, account_id = namespace(
            members, request.headers.get("Authorization"), self.region, self.account_id
        )
        host = request.headers.get("Host") or self.default_host
        return Endpoint(region, account_id, host, self.scheme, home=(self.region, self.account_id))


def error(protocol: WireProtocol, exc: BaseException, exchange: Exchange) -> Response:
    """The SQS answer for an error: the client's mistakes in its terms, the server's without internals."""
    if isinstance(exc, errors.WireError):
        wire = exc
    elif isinstance(exc, DurableQError):
        wire = errors.from_library(exc)
    elif isinstance(exc, Exception):
        wire = errors.internal(exc)
    else:
        raise exc  # KeyboardInterrupt, SystemExit, cancellation: not the request's business
    exchange.code = wire.code
    return protocol.error(wire, exchange.request_id)


def _queue_of(members: Mapping[str, Any]) -> str:
    """The queue a request names, for the access log (best effort)."""
    url, name = members.get("QueueUrl"), members.get("QueueName")
    try:
        if isinstance(url, str):
            return queue_name(url)[:80]
    except errors.WireError:
        return "-"
    return name[:80] if isinstance(name, str) else "-"
