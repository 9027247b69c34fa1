"""The handler the worker processes run (importable, as ``durableq.Worker`` requires).

It works for a random while, sometimes long enough that the worker's
heartbeat must extend the visibility timeout, and sometimes fails so that the
message is retried through its visibility timeout.
"""

from __future__ import annotations

import random
import threading
import time

import durableq

_rng = random.Random()
_lock = threading.Lock()
_settings = {"slow_share": 0.1, "slow_seconds": 1.5, "fail_share": 0.1}


def configure(seed: int, **settings: float) -> None:
    _rng.seed(seed)
    _settings.update(settings)


def handle(message: durableq.Message) -> None:
    with _lock:  # random.Random is shared by the worker's handler threads
        slow = _rng.random() < _settings["slow_share"]
        fail = _rng.random() < _settings["fail_share"]
        pause = _rng.uniform(0, _settings["slow_seconds"] if slow else 0.02)
    time.sleep(pause)
    if fail:
        raise RuntimeError(f"message {message.message_id} fails on purpose")


def backoff(receive_count: int) -> int:
    """Retry a failed message after 1 s, so that a run's drain does not wait minutes."""
    return 1
