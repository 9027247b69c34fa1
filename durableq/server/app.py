"""The HTTP server: reads a request, picks its protocol, checks its signature, runs its action.

Every request is one library call (or a few), each in its own transaction;
a long poll waits in its own thread and holds up no other request.  Threads
serving connections are reused (see :class:`_Workers`): the library keeps one
SQLite connection per thread, so the number of threads bounds the number of
open connections however many clients come and go.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import durableq
from durableq.errors import DurableQError

from . import errors, protocol_json, protocol_query, sigv4
from .actions import ACTIONS, Call
from .params import Params
from .urls import Endpoint
from .wire import Request, Response, WireProtocol

log = logging.getLogger(__name__)

#: Bodies over this many bytes are refused (413).  A 1 MiB message (the most
#: a queue allows) takes at most about 3 MiB once JSON- or form-encoded.
MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: Threads serving connections (and so SQLite connections) at the most.
MAX_CONNECTIONS = 128
#: A keep-alive connection idle this long is closed (clients reconnect on their own).
IDLE_TIMEOUT = 60.0


class _Workers:
    """Daemon threads that serve connections, started on demand up to a limit and then reused."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._jobs: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._idle = 0

    def submit(self, job: Callable[..., None], *args: Any) -> None:
        with self._lock:
            if self._idle == 0 and self._started < self._limit:
                self._started += 1
                threading.Thread(
                    target=self._work, name=f"durableq-http-{self._started}", daemon=True
                ).start()
            else:
                self._idle -= 1  # this job will wake an idle worker (or wait for the next one free)
        self._jobs.put((job, args))

    def _work(self) -> None:
        while True:
            job, args = self._jobs.get()
            try:
                job(*args)
            finally:
                with self._lock:
                    self._idle += 1


class SQSServer(ThreadingHTTPServer):
    """An SQS endpoint over one durableq broker."""

    request_queue_size = 128  # connections waiting to be accepted (socketserver's default is 5)

    def __init__(
        self,
        address: tuple[str, int],
        broker: durableq.Broker,
        *,
        region: str,
        account_id: str,
        credentials: Mapping[str, str] | None,
    ) -> None:
        super().__init__(address, _Handler)
        self.broker = broker
        self.region = region
        self.account_id = account_id
        self.credentials = dict(credentials) if credentials else None
        self._workers = _Workers(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._workers.submit(self.process_request_thread, request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def handle(self, request: Request) -> Response:
        """The response to one request, errors included; never raises."""
        request_id = str(uuid.uuid4())
        protocol: WireProtocol = protocol_json if protocol_json.handles(request) else protocol_query
        try:
            if self.credentials is not None:
                sigv4.verify(request, self.credentials, time.time())
            action, members = protocol.parse(request)
            run = ACTIONS.get(action)
            if run is None:
                raise errors.unknown_action(action)
            if request.path.strip("/") and "QueueUrl" not in members:
                members["QueueUrl"] = request.path  # older SDKs post to the queue's URL instead
            endpoint = Endpoint(self.region, self.account_id, request.headers.get("Host") or self.url[7:])
            return protocol.result(action, run(Call(self.broker, endpoint, Params(members))), request_id)
        except errors.WireError as exc:
            return protocol.error(exc, request_id)
        except DurableQError as exc:
            return protocol.error(errors.from_library(exc), request_id)
        except Exception as exc:  # noqa: BLE001 - a bug: answer 500 and keep serving
            return protocol.error(errors.internal(exc), request_id)


class _Handler(BaseHTTPRequestHandler):
    server: SQSServer
    protocol_version = "HTTP/1.1"  # keep-alive: SDKs reuse their connections
    timeout = IDLE_TIMEOUT
    # Headers and body go out in two writes; with Nagle's algorithm the second waits
    # for the client's delayed ACK (40 ms a request).
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._refuse(411, "LengthRequired", "the request needs a Content-Length header")
            return
        if int(length) > MAX_REQUEST_BYTES:
            self._refuse(
                413, "RequestEntityTooLarge", f"request bodies are limited to {MAX_REQUEST_BYTES} bytes"
            )
            return
        self._serve(self.rfile.read(int(length)))

    def do_GET(self) -> None:
        self._serve(b"")

    def _serve(self, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        request = Request(self.command, path, query, self.headers, body)
        self._send(self.server.handle(request))

    def _refuse(self, status: int, code: str, message: str) -> None:
        self.close_connection = True  # the unread body would be taken for the next request
        request = Request(self.command, self.path, "", self.headers, b"")
        protocol: WireProtocol = protocol_json if protocol_json.handles(request) else protocol_query
        self._send(protocol.error(errors.WireError(code, message, status=status), str(uuid.uuid4())))

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(response.body)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client left (a long poll it gave up on)

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):  # one line a request: format it only when it is wanted
            log.debug("%s %s", self.address_string(), format % args)
