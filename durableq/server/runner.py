"""Running the endpoint: the socket, the pool, the ASGI app and uvicorn in a thread of their own."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterable, Mapping
from os import PathLike

import uvicorn

import durableq

from .app import SQSApp
from .dispatch import Dispatcher
from .guard import HostRule
from .http import protocol_class
from .pool import BoundedPool
from .settings import Bounds

#: Connections the kernel may hold before they are accepted.
BACKLOG = 2_048
#: How long :func:`start` waits for uvicorn to listen.
START_TIMEOUT = 30.0


class ListeningUvicorn(uvicorn.Server):
    """uvicorn's server, telling when it listens and which loop it runs on."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self.failure: BaseException | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    def run_in_thread(self, sock: socket.socket) -> None:
        try:
            self.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that started us
            self.failure = exc
        finally:
            self.ready.set()


class Runner:
    """A started endpoint: stop() ends the thread, the pool and the listening socket."""

    def __init__(
        self, server: ListeningUvicorn, thread: threading.Thread, app: SQSApp, pool: BoundedPool
    ) -> None:
        self._server = server
        self._thread = thread
        self._app = app
        self._pool = pool

    def stop(self) -> None:
        self._app.stop_waiting()
        self._server.should_exit = True
        self._thread.join()
        self._pool.shutdown(wait=True)


def start(
    broker: durableq.Broker,
    *,
    host: str,
    port: int,
    region: str,
    account_id: str,
    credentials: Mapping[str, str] | None,
    tls: tuple[str | PathLike[str], str | PathLike[str]] | None,
    allow_hosts: Iterable[str],
    bounds: Bounds,
    loop: str,
    http: type[asyncio.Protocol] | str | None = None,
) -> tuple[str, Runner]:
    """Bind, start uvicorn in a thread, and return the URL once it listens.

    ``http`` replaces the HTTP protocol (the benchmark compares uvicorn's h11 with
    httptools this way); by default it is httptools with the endpoint's bounds.
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.create_server((host.strip("[]"), port), family=family, backlog=BACKLOG)
    try:
        bound_port = sock.getsockname()[1]
        scheme = "https" if tls else "http"
        authority = (
            f"[{host.strip('[]')}]:{bound_port}" if family == socket.AF_INET6 else f"{host}:{bound_port}"
        )
        pool = BoundedPool(bounds.pool_threads, bounds.max_pending)
        dispatcher = Dispatcher(
            broker,
            region=region,
            account_id=account_id,
            credentials=credentials,
            scheme=scheme,
            default_host=authority,
        )
        holder: list[ListeningUvicorn] = []
        app = SQSApp(
            dispatcher,
            pool,
            HostRule(host.strip("[]"), allow_hosts),
            bounds,
            connections=lambda: len(holder[0].server_state.connections) if holder else 0,
        )
        config = uvicorn.Config(
            app,
            http=http or protocol_class(bounds, app),
            ws="none",
            loop=loop,
            lifespan="off",
            log_config=None,
            access_log=False,  # ours is app.py's, with the SQS action and queue
            server_header=False,
            proxy_headers=False,
            timeout_keep_alive=bounds.keep_alive_timeout,
            timeout_graceful_shutdown=int(bounds.shutdown_grace),
            backlog=BACKLOG,
            ssl_certfile=None if tls is None else tls[0],
            ssl_keyfile=None if tls is None else tls[1],
        )
        config.load()  # here, so that a bad certificate fails serve() rather than the thread
        server = ListeningUvicorn(config)
        holder.append(server)
        thread = threading.Thread(
            target=server.run_in_thread, args=(sock,), name="durableq-server", daemon=True
        )
        thread.start()
    except BaseException:
        sock.close()
        raise
    if not server.ready.wait(START_TIMEOUT) or server.failure is not None:
        server.should_exit = True
        thread.join(START_TIMEOUT)
        pool.shutdown(wait=False)
        raise RuntimeError(f"the endpoint did not start: {server.failure!r}") from server.failure
    return f"{scheme}://{authority}", Runner(server, thread, app, pool)


__all__ = ["Runner", "start"]
