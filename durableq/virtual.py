"""``VirtualQueue``: one of many lightweight queues multiplexed on one host queue, as AWS's temporary
queue client maps its queues onto one SQS queue."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NoReturn

from .errors import UnsupportedOperation
from .handle import QueueHandle
from .ops import audit


class VirtualQueue(QueueHandle):
    """A virtual queue NAME of a standard host queue (``host.virtual_queue(NAME)``), named
    ``HOST#NAME``.  Its messages are rows of the host queue marked with NAME: sends go there,
    receives (long polls included) take only them, and deletes and visibility changes work by
    receipt handle as on the host.  It costs nothing to create or drop — no queue row, no schema
    change — and a receive reads only its own index range, however many virtual queues the host has.
    It shares the host's settings, in-flight limit, retention, dead-letter queue (a dead-lettered
    message arrives there as a plain message), counters and history.  It has the message calls of
    every handle (:class:`~durableq.handle.QueueHandle`); the host's own calls (settings, stats,
    history, tags, permissions, purge, virtual queues) are refused with UnsupportedOperation, each
    recorded in the audit trail as that call refused."""

    def __init__(self, host: QueueHandle, name: str) -> None:
        super().__init__(host._rt, host.name, fifo=False, virtual=name)
        self._host_calls = type(host)  # what the host can do that this cannot

    @property
    def name(self) -> str:
        return f"{self._name}#{self._virtual}"

    @property
    def host(self) -> str:
        """The name of the host queue."""
        return self._name

    def __repr__(self) -> str:
        return f"<durableq.VirtualQueue {self.name!r} in {self._rt.db.name!r}>"

    def __getattr__(self, call: str) -> Callable[..., NoReturn]:
        """A call of the host queue's own (found on it, not on this): refused when made."""
        method = None if call.startswith("_") else getattr(self._host_calls, call, None)
        if not callable(method):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {call!r}")
        return functools.partial(self._refuse, call, audit.action_of(method))

    def _refuse(self, call: str, action: str | None, /, *args: object, **kwargs: object) -> NoReturn:
        error = UnsupportedOperation(
            f"{call} is a call of the host queue {self._name!r}; "
            f"virtual queue {self.name!r} has none of its own"
        )
        if action is None:  # not a management call: nothing for the audit trail
            raise error
        db, clock_ms = self._audit_target
        with audit.management_call(db, clock_ms, action, self.name):
            raise error
