"""SIGINT and SIGTERM as a request to stop, for the long-running commands (worker, scheduler,
dashboard, the endpoint)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


def on_stop_signals(stop: Callable[[int], None]) -> Callable[[], None]:
    """SIGINT and SIGTERM call ``stop(signum)``; returns what puts the old handlers back.

    Signal handlers can only be set from the main thread; elsewhere this does nothing (the caller's
    own ``stop()`` is the way).  ``stop`` runs in a signal handler: it should only note the signal
    (logging there could interleave lines; taking a lock could deadlock with the interrupted code).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {
        sig: signal.signal(sig, lambda signum, _: stop(signum)) for sig in (signal.SIGINT, signal.SIGTERM)
    }

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
