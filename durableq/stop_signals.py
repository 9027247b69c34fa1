"""SIGINT and SIGTERM as a request to stop: how the worker and the scheduler end cleanly."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


def install(stop: Callable[[int], None]) -> Callable[[], None]:
    """SIGINT and SIGTERM call ``stop(signum)``; returns what puts the old handlers back.

    Signal handlers can only be set from the main thread; elsewhere ``stop()`` is the way.
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
