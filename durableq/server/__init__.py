"""An SQS-compatible HTTP endpoint over a durableq file, for boto3, the AWS CLI and other SDKs.

    from durableq.server import serve
    server = serve("queue.db", port=9324)          # runs in a background thread
    boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1", ...)
    server.shutdown()

``run(...)`` serves until SIGINT or SIGTERM, for a main program; the
``durableq serve`` command and ``python -m durableq.server`` call it.  Both
speak AWS JSON 1.0 and the query protocol, and every SQS rule is the
library's: the server only translates.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import durableq

from .app import MAX_CONNECTIONS, MAX_REQUEST_BYTES, SQSServer
from .sigv4 import load_credentials

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9324
DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "000000000000"

Credentials = str | os.PathLike[str] | Mapping[str, str] | None


class Server:
    """A running endpoint: ``url`` to give clients, ``shutdown()`` to stop it and close the file."""

    def __init__(self, http: SQSServer, broker: durableq.Broker) -> None:
        self._http = http
        self._broker = broker
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self._http.url

    @property
    def db(self) -> Path:
        return self._broker.path

    def _start(self) -> Server:
        self._thread = threading.Thread(target=self._http.serve_forever, name="durableq-server", daemon=True)
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving, then close the port and the database (requests still running get an error)."""
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()
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
) -> Server:
    """Open the database, bind the port (0 picks a free one) and serve in a background thread.

    ``credentials`` is a credentials file (lines ``ACCESS_KEY_ID SECRET``) or a
    mapping of access key id to secret; with it, every request must carry a
    valid SigV4 signature no older than 15 minutes.  Without it, anyone who
    can reach the port may use every queue: keep the default 127.0.0.1.
    """
    if credentials is not None and not isinstance(credentials, Mapping):
        credentials = load_credentials(credentials)
    broker = durableq.open(db, durability=durability)
    try:
        http = SQSServer((host, port), broker, region=region, account_id=account_id, credentials=credentials)
    except BaseException:
        broker.close()
        raise
    return Server(http, broker)._start()


def announce(server: Server) -> None:
    """What :func:`run` prints once it listens: one line ending in the URL (scripts read it)."""
    print(f"durableq: serving {server.db} at {server.url}", flush=True)


def run(
    db: str | os.PathLike[str], *, on_ready: Callable[[Server], None] | None = announce, **options: Any
) -> None:
    """:func:`serve` until SIGINT or SIGTERM (call it from the main thread).

    ``on_ready`` runs once it listens.
    """
    stopping = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with serve(db, **options) as server:
            if on_ready is not None:
                on_ready(server)
            stopping.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = [
    "DEFAULT_ACCOUNT_ID",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_REGION",
    "MAX_CONNECTIONS",
    "MAX_REQUEST_BYTES",
    "Server",
    "announce",
    "load_credentials",
    "run",
    "serve",
]
