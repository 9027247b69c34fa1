"""``TemporaryQueue``: a queue that deletes itself after ``idle_timeout`` seconds without use."""

from __future__ import annotations

from types import TracebackType

from .queue import Queue


class TemporaryQueue(Queue):
    """A queue made by :meth:`Broker.temporary_queue`: uniquely named, kept alive by its broker's
    heartbeats while the broker is open, deleted when idle for ``idle_timeout`` seconds (by any
    process, also after this one crashed), on :meth:`delete_queue`, at the end of a ``with`` block, and
    when its broker closes."""

    @property
    def idle_timeout(self) -> int:
        """Seconds without a send or receive after which the queue is deleted."""
        timeout = self.attributes()["idle_timeout"]
        assert isinstance(timeout, int)
        return timeout

    def delete_queue(self) -> None:
        """Delete the queue and its messages now (nothing if it is already gone)."""
        self._rt.temporary_queues.end(self.name)

    def __enter__(self) -> TemporaryQueue:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.delete_queue()
