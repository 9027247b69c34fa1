"""``VirtualQueue``: one of many lightweight queues multiplexed on one host queue, as AWS's temporary
queue client maps its queues onto one SQS queue."""

from __future__ import annotations

from typing import Any, NoReturn

from .errors import UnsupportedOperation
from .ops.runtime import Runtime
from .queue import Queue
from .types import MessageEvent, QueueStats


class VirtualQueue(Queue):
    """A virtual queue NAME of a standard host queue (``host.virtual_queue(NAME)``), named
    ``HOST#NAME``.  Its messages are rows of the host queue marked with NAME: sends go there,
    receives (long polls included) take only them, and deletes and visibility changes work by
    receipt handle as on the host.  It costs nothing to create or drop — no queue row, no schema
    change — and a receive reads only its own index range, however many virtual queues the host has.
    It shares the host's settings, in-flight limit, retention, dead-letter queue (a dead-lettered
    message arrives there as a plain message), counters and history; its management calls (settings,
    tags, permissions, purge, stats) are the host's and refused here."""

    def __init__(self, runtime: Runtime, host: str, name: str) -> None:
        super().__init__(runtime, host, fifo=False)
        self._virtual = name

    @property
    def name(self) -> str:
        return f"{self._name}#{self._virtual}"

    @property
    def host(self) -> str:
        """The name of the host queue."""
        return self._name

    def __repr__(self) -> str:
        return f"<durableq.VirtualQueue {self.name!r} in {self._rt.db.name!r}>"

    def _refuse(self, what: str) -> NoReturn:
        raise UnsupportedOperation(
            f"{what} is a call of the host queue {self._name!r}; "
            f"virtual queue {self.name!r} has none of its own"
        )

    def attributes(self) -> dict[str, Any]:
        self._refuse("attributes")

    def set_attributes(self, /, **changes: Any) -> None:
        self._refuse("set_attributes")

    def stats(self) -> QueueStats:
        self._refuse("stats")

    def purge(self) -> None:
        self._refuse("purge")

    def tag(self, /, **tags: str) -> None:
        self._refuse("tag")

    def untag(self, *keys: str) -> None:
        self._refuse("untag")

    def add_permission(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("add_permission")

    def remove_permission(self, label: str) -> None:
        self._refuse("remove_permission")

    def events(self, **kwargs: Any) -> list[MessageEvent]:
        self._refuse("events")

    def virtual_queue(self, name: str) -> VirtualQueue:
        self._refuse("virtual_queue")
