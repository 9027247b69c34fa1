"""The ASGI application uvicorn runs: reads a request within its bounds, answers it, logs it.

Everything that calls the library runs in the bounded pool (``pool.py``); the
event loop only reads and writes HTTP, applies the browser rules
(``guard.py``) and awaits long polls, which hold no thread while they wait.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from durableq.aio import outlast
from durableq.errors import DurableQError
from durableq.text import printable

from . import errors, guard, peek
from .dispatch import Dispatcher, Exchange, PendingReceive, error, protocol_of
from .metrics import Metrics
from .pool import BoundedPool, PoolBusy
from .settings import HEALTH_PATH, METRICS_PATH, Bounds
from .wire import Headers, Request, Response, WireProtocol

access_log = logging.getLogger("durableq.server.access")
log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ClientGone(Exception):
    """The client closed the connection before its request was read."""


class SQSApp:
    """An ASGI 3 application: the SQS endpoint over one broker."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        pool: BoundedPool,
        hosts: guard.HostRule,
        bounds: Bounds,
        connections: Callable[[], int] = lambda: 0,
    ) -> None:
        self._dispatcher = dispatcher
        self._pool = pool
        self._hosts = hosts
        self._bounds = bounds
        self._connections = connections
        self._polls: set[asyncio.Task[list[Any]]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._metrics = Metrics(dispatcher.broker, self._state)

    @property
    def waiting_receives(self) -> int:
        return len(self._polls)

    def stop_waiting(self) -> None:
        """End every waiting long poll now, empty (thread-safe; for shutdown)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: [task.cancel() for task in list(self._polls)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan events (uvicorn runs with lifespan off), no websockets
        self._loop = asyncio.get_running_loop()
        started = time.perf_counter()
        exchange = Exchange()
        headers = Headers.from_asgi(scope["headers"])
        response = await self._respond(scope, headers, receive, exchange)
        if exchange.unanswered is not None and await _client_gone(receive):
            self._undo(exchange.unanswered)  # as serve_now's answer that finds its client gone
        await self._answer(scope, send, response, exchange, started)

    def serve_now(
        self,
        scope: Scope,
        body: bytes,
        write: Callable[[Response], bool],
        wait: Callable[[Callable[[Scope, Receive, Send], Awaitable[None]]], None],
    ) -> None:
        """A POST whose whole body has arrived, served from its connection's callbacks (``http.py``):
        no ASGI task and no awaits, one hand-off to the pool and one back.  ``write`` sends the answer
        (False: the client has gone, and what the request claimed is put back, see :meth:`_undo`);
        a receive that is to wait goes to ``wait``, which runs the ASGI app it is given for it.

        What :meth:`__call__` does for such a request, in the same order; with one client a task,
        its steps and the ASGI messages were a good part of the loop's time per request.
        """
        self._loop = asyncio.get_running_loop()
        started = time.perf_counter()
        exchange = Exchange()
        headers = Headers.from_asgi(scope["headers"])
        path = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
        request = Request("POST", path, scope.get("query_string", b"").decode("latin-1"), headers, body)
        protocol = protocol_of(request)

        def finish(response: Response) -> None:
            exchange.status = response.status
            if not write(response) and exchange.unanswered is not None:
                self._undo(exchange.unanswered)  # the client left while its receive claimed
            if access_log.isEnabledFor(logging.INFO):
                _log(scope, exchange, time.perf_counter() - started)

        def then(outcome: Response | PendingReceive | None, exc: BaseException | None) -> None:
            if exc is not None:  # handle() answers every error but exits and cancellation
                finish(error(protocol, errors.internal(exc), exchange))
            elif isinstance(outcome, PendingReceive):
                wait(
                    lambda scope, receive, send: self._wait(scope, receive, send, outcome, exchange, started)
                )
            elif outcome is not None:
                finish(outcome)

        try:
            guard.check_browser(headers, self._hosts)
            self._pool.call(self._dispatcher.handle, (request, exchange), then)
        except Exception as exc:  # noqa: BLE001 - the browser rule's refusal, PoolBusy: answered
            finish(error(protocol, _as_wire(exc), exchange))

    def _undo(self, unanswered: Callable[[], None]) -> None:
        """Run what undoes a request whose answer reached nobody (a ReceiveMessage's claim: its
        messages go back, visible and uncounted) in the pool, else in the loop's default executor
        (the pool refuses work when full or shut down); a failure is logged: what was claimed then
        comes back at its visibility timeout, as a lost answer's does."""

        def done(_: object, exc: BaseException | None) -> None:
            if exc is not None:
                log.warning("could not put back an unanswered receive: %s", exc)

        try:
            self._pool.call(unanswered, (), done)
        except Exception:  # noqa: BLE001 - PoolBusy, or shut down: the loop's default executor
            future = asyncio.get_running_loop().run_in_executor(None, unanswered)
            future.add_done_callback(lambda f: None if f.cancelled() else done(None, f.exception()))

    async def _wait(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        pending: PendingReceive,
        exchange: Exchange,
        started: float,
    ) -> None:
        """The ASGI app of a receive that :meth:`serve_now` began and that is to wait."""
        await receive()  # the request's body, read already: the next message is the disconnect
        try:
            response = await self._receive(pending, receive)
        except BaseException as exc:  # noqa: BLE001 - _failed answers every error (and re-raises cancellation)
            response = self._failed(pending.protocol, exc, exchange)
        await self._answer(scope, send, response, exchange, started)

    async def _answer(
        self, scope: Scope, send: Send, response: Response, exchange: Exchange, started: float
    ) -> None:
        exchange.status = response.status
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [
                    *(
                        (name.encode("latin-1"), value.encode("latin-1"))
                        for name, value in response.headers.items()
                    ),
                    (b"content-length", str(len(response.body)).encode("latin-1")),
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.body})
        if access_log.isEnabledFor(logging.INFO):
            _log(scope, exchange, time.perf_counter() - started)

    async def _respond(
        self, scope: Scope, headers: Headers, receive: Receive, exchange: Exchange
    ) -> Response:
        method: str = scope["method"]
        path = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        protocol = protocol_of(Request(method, path, query, headers, b""))
        try:
            guard.check_browser(headers, self._hosts)
            if path == HEALTH_PATH and method == "GET":
                return await self._health()
            if path == METRICS_PATH and method == "GET":
                body = await self._run(self._metrics.render)
                return Response(200, body, {"Content-Type": self._metrics.content_type})
            if path == peek.PEEK_PATH and method == "GET":
                client = scope.get("client")
                request = Request(method, path, query, headers, b"")
                return await self._run(peek.answer, self._dispatcher, request, client[0] if client else None)  # type: ignore[no-any-return]
            if method not in ("GET", "POST"):
                raise errors.WireError(
                    "MethodNotAllowed", f"the endpoint takes GET and POST, not {method[:20]}", status=405
                )
            body = await self._read_body(headers, receive) if method == "POST" else b""
            request = Request(method, path, query, headers, body)
            outcome: Response | PendingReceive = await self._run(self._dispatcher.handle, request, exchange)
            if isinstance(outcome, PendingReceive):
                return await self._receive(outcome, receive)
            return outcome
        except BaseException as exc:  # noqa: BLE001 - _failed answers every error (and re-raises cancellation)
            return self._failed(protocol, exc, exchange)

    def _failed(self, protocol: WireProtocol, exc: BaseException, exchange: Exchange) -> Response:
        if isinstance(exc, ClientGone):
            exchange.code = "ClientGone"
            return Response(499, b"")  # nobody reads it; the access log shows what happened
        response = error(protocol, _as_wire(exc), exchange)
        if response.status in (408, 413):  # the body was not read: this connection cannot go on
            response.headers["Connection"] = "close"
        return response

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._pool.run(fn, *args)

    async def _read_body(self, headers: Headers, receive: Receive) -> bytes:
        limit = self._bounds.max_request_bytes
        length = headers.get("Content-Length")
        if length is not None and length.isdecimal() and int(length) > limit:
            raise _too_large(limit)
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self._bounds.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ClientGone
                    chunk: bytes = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise _too_large(limit)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise errors.WireError(
                "RequestTimeout",
                f"the request body did not arrive within {self._bounds.body_timeout:g} seconds",
                status=408,
            ) from None

    async def _receive(self, pending: PendingReceive, receive: Receive) -> Response:
        """Await a receive; a client that hangs up or a server that stops ends it without taking messages."""
        poll = asyncio.ensure_future(pending.waiting.result(self._pool))
        self._polls.add(poll)
        # The body is read: the next ASGI message is the disconnect, whenever it comes.
        gone = asyncio.ensure_future(receive())
        try:
            await asyncio.wait((poll, gone), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await self._end(poll)  # this request is cancelled: the poll ends with it
            raise
        finally:
            gone.cancel()
        if not poll.done():
            await self._end(poll)  # the client left while the poll waited: nothing was taken
            raise ClientGone
        self._polls.discard(poll)
        if poll.cancelled():
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError  # this request itself is being cancelled
            return pending.respond([])  # the server stops: an empty answer, as at the deadline
        try:
            messages = poll.result()
        except DurableQError as exc:
            raise pending.failed(exc) from exc
        return pending.respond(messages)

    async def _end(self, poll: asyncio.Task[list[Any]]) -> None:
        """Cancel a poll and count it as waiting until it has ended: a look it was running finishes
        first and puts back what it claimed (``ops.async_steps``), so a send after the count
        drops is never taken by a receive whose client has gone."""
        poll.cancel()
        try:
            await outlast(poll)
        finally:
            self._polls.discard(poll)
        if not poll.cancelled():
            poll.exception()  # it may have failed as its client left: nobody to tell, but it is read

    def _state(self) -> dict[str, int]:
        """The endpoint's own figures, for /health and /metrics."""
        return {
            "connections": self._connections(),
            "waiting_receives": len(self._polls),
            "pool_outstanding": self._pool.outstanding,
        }

    async def _health(self) -> Response:
        """``GET /health``: the process serves and its pool takes work (for process managers)."""
        await self._run(int)  # a no-op through the pool: 503 if it is full
        body = {"status": "ok", **self._state()}
        return Response(200, json.dumps(body).encode(), {"Content-Type": "application/json"})


async def _client_gone(receive: Receive) -> bool:
    """Whether the client of a request whose body has been read has gone already: the next ASGI message
    is the disconnect, which uvicorn's ``receive`` returns at its first step once the connection is
    lost (and otherwise waits for; that wait is cancelled here)."""
    next_message = asyncio.ensure_future(receive())
    await asyncio.sleep(0)  # one turn of the loop: the receive's first step runs before this resumes
    if not next_message.done():
        next_message.cancel()
        return False
    return (
        not next_message.cancelled()
        and next_message.exception() is None
        and (next_message.result()["type"] == "http.disconnect")
    )


def _as_wire(exc: BaseException) -> BaseException:
    if isinstance(exc, PoolBusy):
        return errors.service_unavailable("the server is at its limit of pending work; retry the request")
    return exc


def _too_large(limit: int) -> errors.WireError:
    return errors.WireError(
        "RequestEntityTooLarge", f"request bodies are limited to {limit} bytes", status=413
    )


def _log(scope: Scope, exchange: Exchange, seconds: float) -> None:
    """One line per request: what the client sent is escaped in the line (a line break in an action or
    a queue URL would forge a line of its own) and kept exact in the fields (``--log-format json``)."""
    client = scope.get("client")
    access_log.info(
        "%s %s %s %s %d %.1fms %s",
        f"{client[0]}:{client[1]}" if client else "-",
        printable(scope["method"]),
        printable(exchange.action),
        printable(exchange.queue),
        exchange.status,
        seconds * 1000,
        exchange.code or "-",
        extra={
            "access": {
                "client": client[0] if client else None,
                "method": scope["method"],
                "action": exchange.action,
                "queue": exchange.queue,
                "status": exchange.status,
                "duration_ms": round(seconds * 1000, 3),
                "error": exchange.code or None,
                "request_id": exchange.request_id,
            }
        },
    )
