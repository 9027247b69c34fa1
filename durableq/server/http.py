"""uvicorn's httptools protocol with the endpoint's bounds on connections and request heads.

uvicorn parses HTTP (httptools, in C) and bounds idle keep-alive time; it does
not bound how long a client may take to send its headers (a client sending a
header line every few seconds holds its connection for ever), their size, or
how many connections are open.  This subclass adds those, from
:class:`~durableq.server.settings.Bounds`, and answers anything uvicorn
refuses as malformed with an SQS error in the request's protocol rather than
plain text.  The body's bounds are the application's (``app.py``).

A POST whose body arrives with its head (what an SDK's request is) skips
ASGI: it goes to :meth:`SQSApp.serve_now <durableq.server.app.SQSApp.serve_now>`
at the end of the ``data_received`` that brought it, and its answer is
written here, without a task per request, its steps and the ASGI messages
(with one client they were a good part of the event loop's time per
request).  Everything else, and a receive that is to wait, runs the ASGI
application as uvicorn does.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, cast

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

from . import protocol_json, protocol_query
from .errors import WireError
from .settings import Bounds
from .wire import Headers, Request, Response, WireProtocol

if TYPE_CHECKING:
    from .app import SQSApp


class _Refused(Exception):
    """Raised from a parser callback to stop reading a request that broke a bound."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """One connection: uvicorn's protocol, plus the head's size and time bounds and the connection cap."""

    bounds: Bounds = Bounds()
    #: Serves complete POSTs without ASGI (None: every request goes through the ASGI app).
    sqs: SQSApp | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._reading = False
        self._deferred: tuple[RequestResponseCycle, Any] | None = None
        self._head_bytes = 0
        self._refusal: WireError | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm_head_timer()  # the first request's head must come within the bound too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    # -- a complete POST, served without ASGI ----------------------------------------

    def data_received(self, data: bytes) -> None:
        self._reading = True
        try:
            super().data_received(data)
        finally:
            self._reading = False
        deferred, self._deferred = self._deferred, None
        if deferred is not None:
            self._serve(*deferred)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if (
            self._reading
            and self._deferred is None
            and self.sqs is not None
            and app is self.app  # not uvicorn's own answer (its concurrency limit's 503)
            and cycle.scope["method"] == "POST"
            and not cycle.waiting_for_100_continue
        ):
            self._deferred = (cycle, app)  # its body may be in this same data: see _serve
            return
        super()._start_asgi_task(cycle, app)

    def _serve(self, cycle: RequestResponseCycle, app: Any) -> None:
        """A POST whose head came in the data just read: served now if its body came too."""
        if (
            self.sqs is None
            or cycle.more_body  # still coming: the application reads it, within its time bound
            or len(cycle.body) > self.bounds.max_request_bytes  # the application refuses it (413)
            or self.transport.is_closing()
        ):
            super()._start_asgi_task(cycle, app)
            return
        body, cycle.body = bytes(cycle.body), bytearray()
        start = super()._start_asgi_task
        self.sqs.serve_now(
            cast(dict[str, Any], cycle.scope),  # uvicorn's TypedDict, the app's plain mapping
            body,
            lambda response: self._write(cycle, response),
            lambda waiting: start(cycle, cast(Any, waiting)),
        )

    def _write(self, cycle: RequestResponseCycle, response: Response) -> bool:
        """The answer of a request served by :meth:`_serve`, in one write, as uvicorn ends a response;
        False if the client has gone (nobody to answer)."""
        if cycle.disconnected or cycle.response_complete or self.transport.is_closing():
            return False
        content = [STATUS_LINE[response.status]]
        for name, value in cycle.default_headers:
            content += (name, b": ", value, b"\r\n")
        for text, value_text in response.headers.items():
            content += (text.lower().encode("latin-1"), b": ", value_text.encode("latin-1"), b"\r\n")
        content += (b"content-length: ", str(len(response.body)).encode("latin-1"), b"\r\n")
        if response.headers.get("Connection") == "close":
            cycle.keep_alive = False
        elif not cycle.keep_alive:  # an HTTP/1.0 client, a server shutting down
            content.append(b"connection: close\r\n")
        content += (b"\r\n", response.body)
        cycle.response_started = cycle.response_complete = True
        cycle.waiting_for_100_continue = False
        cycle.message_event.set()
        self.transport.write(b"".join(content))
        if not cycle.keep_alive:
            self.transport.close()
        cycle.on_response()
        return True

    # -- the request head ----------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        if self._head_timer is None:
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm_head_timer()
        if len(self.connections) > self.bounds.max_connections:
            self._refusal = WireError(
                "ServiceUnavailable",
                f"the server holds its limit of {self.bounds.max_connections} connections; retry later",
                status=503,
                sender=False,
            )
            raise _Refused
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and not isinstance(cycle.transport, _OneWrite):
            cycle.transport = _OneWrite(self.transport, cycle)  # type: ignore[assignment]

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.bounds.max_header_bytes:
            self._refusal = WireError(
                "RequestHeaderFieldsTooLarge",
                f"the request line and headers are limited to {self.bounds.max_header_bytes} bytes",
                status=431,
            )
            raise _Refused  # httptools stops; uvicorn calls send_400_response, which answers the refusal

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.bounds.header_timeout, self._head_too_slow)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # no request is being served
            self._refuse(
                WireError(
                    "RequestTimeout",
                    f"the request line and headers did not arrive within {self.bounds.header_timeout:g} s",
                    status=408,
                )
            )

    # -- answers that never reach the application -----------------------------------

    def send_400_response(self, msg: str) -> None:
        refusal, self._refusal = self._refusal, None
        self._refuse(refusal or WireError("MalformedHttpRequest", f"the request is not valid HTTP: {msg}"))

    def _refuse(self, err: WireError) -> None:
        """Answer with an SQS error in the request's protocol (as far as its headers tell) and close."""
        if self.transport.is_closing():
            return
        self._disarm_head_timer()
        headers = Headers((n.decode("latin-1"), v.decode("latin-1")) for n, v in (self.headers or []))
        protocol: WireProtocol = (
            protocol_json if protocol_json.handles(Request("POST", "/", "", headers, b"")) else protocol_query
        )
        response = protocol.error(err, str(uuid.uuid4()))
        self.transport.write(_raw(response))
        self.transport.close()


class _OneWrite:
    """A request's view of its connection's transport: a response's head waits for its body, so that
    both leave in one write (one system call, one TCP segment, one wake-up of the client) where
    uvicorn writes each on its own."""

    __slots__ = ("_cycle", "_head", "_held", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None
        self._held = False  # the head was held (once: later writes are the body's)
        completed = cycle.on_response

        def on_response() -> None:  # a response without a body write (HEAD) ends: its head goes now
            self.flush()
            completed()

        cycle.on_response = on_response

    def write(self, data: bytes) -> None:
        head, self._head = self._head, None
        if head is not None:
            self._transport.write(head + data)
        elif self._cycle.response_started and not self._held:
            self._head, self._held = data, True  # the head: its body comes next (or the end, on HEAD)
        else:
            self._transport.write(data)  # "100 Continue" before the response; a body's later parts

    def flush(self) -> None:
        head, self._head = self._head, None
        if head is not None:
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _raw(response: Response) -> bytes:
    lines = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}"]
    lines += [f"{name}: {value}" for name, value in response.headers.items()]
    lines += [f"content-length: {len(response.body)}", "connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + response.body


_REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def protocol_class(bounds: Bounds, sqs: SQSApp | None = None) -> type[BoundedHttpToolsProtocol]:
    """The protocol class uvicorn instantiates per connection, with these bounds; with ``sqs``, complete
    POSTs go to ``sqs.serve_now`` (the app uvicorn runs must be that same ``sqs``)."""
    return type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,), {"bounds": bounds, "sqs": sqs})
