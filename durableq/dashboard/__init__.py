"""``durableq dashboard``: a web dashboard of one database, for people (see docs/guides/dashboard.md).

    from durableq import dashboard
    with dashboard.start("queues.db") as running:
        print(running.url)   # http://127.0.0.1:8899/?token=...

Pages: every queue's depth (live), one queue's charts, settings and waiting messages, a message's
history, the audit trail, and a dead-letter queue's redrive, move tasks and purge behind a
confirmation.  Needs the dashboard extra: ``pip install 'durableq[dashboard]'``.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any
from urllib.parse import quote

import durableq
from durableq import limits
from durableq.errors import InvalidParameterValue
from durableq.signals import on_stop_signals

INSTALL_HINT = "pip install 'durableq[dashboard]'"


class Dashboard:
    """A dashboard serving in a thread of its own: ``url`` (with the token) until :meth:`stop`."""

    def __init__(self, url: str, token: str, broker: durableq.Broker, stop: Callable[[], None]) -> None:
        self.url = url
        self.token = token
        self.broker = broker
        self._stop = stop

    def stop(self) -> None:
        """Stop serving (the port is closed when this returns) and close the broker."""
        self._stop()

    def __enter__(self) -> Dashboard:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start(
    db: str | os.PathLike[str],
    *,
    host: str = limits.DASHBOARD_HOST,
    port: int = limits.DASHBOARD_PORT,
    token: str | None = None,
    show_bodies: bool = False,
    keyring: str | os.PathLike[str] | None = None,
    payload_dir: str | os.PathLike[str] | None = None,
    schema: str | None = None,
) -> Dashboard:
    """Open ``db`` (never creating it) and serve its dashboard on ``host``:``port`` (0: a free port).

    ``token`` opens it (a random one by default); ``show_bodies`` shows message bodies (metadata
    only by default)."""
    try:
        import uvicorn

        from durableq.server.runner import START_TIMEOUT, ListeningUvicorn

        from .app import create_app
    except ImportError as exc:
        raise ImportError(
            f"the dashboard needs {exc.name}, which is not installed; install the dashboard extra with: "
            f"{INSTALL_HINT}",
            name=exc.name,
        ) from exc
    if not host.strip("[] "):
        # The socket layer reads "" as every interface: an unset variable must not open the network.
        raise InvalidParameterValue("host must be an address to listen on (127.0.0.1 by default); got ''")
    token = secrets.token_urlsafe(limits.DASHBOARD_TOKEN_BYTES) if token is None else _checked(token)
    broker = durableq.open(db, create=False, keyring=keyring, payload_dir=payload_dir, schema=schema)
    try:
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        sock = socket.create_server((host.strip("[]"), port), family=family)
        app = create_app(broker, token, show_bodies=show_bodies)
    except BaseException:
        broker.close()
        raise
    bound = sock.getsockname()[1]
    authority = f"[{host.strip('[]')}]:{bound}" if family == socket.AF_INET6 else f"{host}:{bound}"
    config = uvicorn.Config(
        app, ws="none", lifespan="off", log_config=None, access_log=False, server_header=False
    )
    server = ListeningUvicorn(config)
    thread = threading.Thread(
        target=server.run_in_thread, args=(sock,), name="durableq-dashboard", daemon=True
    )
    thread.start()
    stopped = threading.Lock()

    def stop() -> None:
        with stopped:
            server.should_exit = True
            thread.join()
            sock.close()
            broker.close()

    if not server.ready.wait(START_TIMEOUT) or server.failure is not None:
        stop()
        raise RuntimeError(f"the dashboard did not start: {server.failure!r}") from server.failure
    return Dashboard(f"http://{authority}/?token={quote(token, safe='')}", token, broker, stop)


def _checked(token: str) -> str:
    """A token given by the user: a password, not a PIN (printable ASCII, no spaces)."""
    if len(token) < limits.DASHBOARD_MIN_TOKEN or not all("!" <= c <= "~" for c in token):
        raise InvalidParameterValue(
            f"the dashboard's token must be at least {limits.DASHBOARD_MIN_TOKEN} printable ASCII "
            f"characters without spaces; got {len(token)} characters"
            + ("" if all("!" <= c <= "~" for c in token) else " with others among them")
        )
    return token


def run(
    db: str | os.PathLike[str], *, on_ready: Callable[[Dashboard], None] | None = None, **options: Any
) -> None:
    """:func:`start` and serve until SIGINT or SIGTERM (call it from the main thread)."""
    signals: list[int] = []
    restore = on_stop_signals(signals.append)
    try:
        with start(db, **options) as dashboard:
            if on_ready is not None:
                on_ready(dashboard)
            while not signals:  # the handler only notes the signal: see durableq.signals
                time.sleep(limits.SERVER_STOP_CHECK)
    finally:
        restore()


__all__ = ["INSTALL_HINT", "Dashboard", "run", "start"]
