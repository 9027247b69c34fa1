"""An SQS-compatible HTTP endpoint over a durableq file, for boto3, the AWS CLI and other SDKs.

    from durableq.server import serve
    server = serve("queue.db", port=9324)          # runs in a background thread
    boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1", ...)
    server.shutdown()

``run(...)`` serves until SIGINT or SIGTERM, for a main program; the
``durableq serve`` command and ``python -m durableq.server`` call it.  Both
speak AWS JSON 1.0 and the query protocol, and every SQS rule is the
library's: the server only translates.  It is an ASGI application
(``app.py``) run by uvicorn; it needs the ``server`` extra
(``pip install 'durableq[server]'``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import durableq
from durableq import limits
from durableq.engines.urls import redacted
from durableq.signals import on_stop_signals

from .settings import (
    DEFAULT_ACCOUNT_ID,
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_REGION,
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    Bounds,
)
from .sigv4 import checked_credentials, load_credentials

if TYPE_CHECKING:
    from .runner import Runner

log = logging.getLogger(__name__)

Credentials = str | os.PathLike[str] | Mapping[str, str] | None
#: What to run when the server's dependencies are missing.
INSTALL_HINT = "pip install 'durableq[server]'"
#: Event loops :func:`serve` can run on ("auto": uvloop when installed).
LOOPS = ("auto", "asyncio", "uvloop")
_BACKLOG = 2_048


class Server:
    """A running endpoint: ``url`` to give clients, ``shutdown()`` to stop it and close the file."""

    def __init__(self, url: str, broker: durableq.Broker, runner: Runner, db: str) -> None:
        self._url = url
        self._broker = broker
        self._runner: Runner | None = runner
        self._db = db

    @property
    def url(self) -> str:
        return self._url

    @property
    def db(self) -> str:
        """The database the endpoint serves, as it was named (a SQLite file's path, or a PostgreSQL URL)."""
        return self._db

    def shutdown(self) -> None:
        """Stop serving, then close the port and the database.

        Waiting long polls end at once (empty); other running requests get
        ``Bounds.shutdown_grace`` seconds to finish.
        """
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop()
            self._broker.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()


def serve(
    db: str | os.PathLike[str],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    region: str = DEFAULT_REGION,
    account_id: str = DEFAULT_ACCOUNT_ID,
    credentials: Credentials = None,
    durability: str = "full",
    tls_cert: str | os.PathLike[str] | None = None,
    tls_key: str | os.PathLike[str] | None = None,
    allow_hosts: Iterable[str] = (),
    bounds: Bounds | None = None,
    loop: str = "auto",
    keyring: str | os.PathLike[str] | None = None,
    payload_dir: str | os.PathLike[str] | None = None,
    schema: str | None = None,
) -> Server:
    """Open the database, bind the port (0 picks a free one) and serve in a background thread.

    ``credentials`` is a credentials file (lines ``ACCESS_KEY_ID SECRET``) or a
    mapping of access key id to secret; with it, every request must carry a
    valid SigV4 signature no older than 15 minutes.  Without it (None), anyone who
    can reach the port may use every queue: keep the default 127.0.0.1.  An empty
    file or mapping is refused (ValueError).
    ``tls_cert``/``tls_key`` (PEM files) serve HTTPS.  ``allow_hosts`` are
    extra names the Host header may carry (see ``guard.py``; ``"*"`` for any).
    ``keyring``, ``payload_dir`` and ``schema`` are those of :func:`durableq.open` (encrypted queues
    need the keyring).
    """
    try:
        from .runner import start  # uvicorn is imported only when a server starts
    except ImportError as exc:
        raise ImportError(
            f"the SQS endpoint needs {exc.name or 'uvicorn'}, which is not installed; install the server "
            f"extra with: {INSTALL_HINT}",
            name=exc.name,
        ) from exc

    if credentials is not None:  # {} is refused (it would let nobody in), not taken for None (everybody)
        credentials = (
            checked_credentials(credentials)
            if isinstance(credentials, Mapping)
            else load_credentials(credentials)
        )
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("give both tls_cert and tls_key, or neither")
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {', '.join(LOOPS)}; got {loop!r}")
    if credentials is None and not _is_loopback(host):
        log.warning(
            "serving %s on %s without credentials: anyone who can reach the port can read, send and delete "
            "messages; give --credentials (and --tls-cert/--tls-key), or bind 127.0.0.1",
            db,
            host,
        )
    broker = durableq.open(db, durability=durability, keyring=keyring, payload_dir=payload_dir, schema=schema)
    try:
        url, runner = start(
            broker,
            host=host,
            port=port,
            region=region,
            account_id=account_id,
            credentials=credentials,
            tls=None if tls_cert is None or tls_key is None else (tls_cert, tls_key),
            allow_hosts=allow_hosts,
            bounds=bounds or Bounds(),
            loop=loop,
        )
    except BaseException:
        broker.close()
        raise
    return Server(url, broker, runner, os.fspath(db))


def announce(server: Server) -> None:
    """What :func:`run` prints once it listens: one line ending in the URL (scripts read it)."""
    print(f"durableq: serving {redacted(server.db)} at {server.url}", flush=True)


def run(
    db: str | os.PathLike[str], *, on_ready: Callable[[Server], None] | None = announce, **options: Any
) -> None:
    """:func:`serve` until SIGINT or SIGTERM (call it from the main thread).

    ``on_ready`` runs once it listens.
    """
    # The handler only records the signal, and the main thread looks every STOP_CHECK seconds.  Not
    # an Event: the kernel may hand SIGTERM to any thread (uvicorn's, a pool's); the main thread,
    # blocked in a lock wait, is then never interrupted to run the handler, and a handler that takes
    # the Event's lock could deadlock with the main thread holding it.
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("durableq.server.run() stops on signals: call it from the main thread")
    signals: list[int] = []
    restore = on_stop_signals(signals.append)
    try:
        with serve(db, **options) as server:
            if on_ready is not None:
                on_ready(server)
            while not signals:
                time.sleep(limits.SERVER_STOP_CHECK)
    finally:
        restore()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = [
    "DEFAULT_ACCOUNT_ID",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_REGION",
    "LOOPS",
    "MAX_CONNECTIONS",
    "MAX_REQUEST_BYTES",
    "Bounds",
    "Server",
    "announce",
    "load_credentials",
    "run",
    "serve",
]
