"""A receive whose first look found nothing and which is to wait (``Queue.receive_or_wait``).

The SQS endpoint makes a ReceiveMessage's first look in the pool thread that
parsed the request (:meth:`Receiver.start`); only a receive that is to wait
goes back to the event loop, as one of these.  The long-poll rule stays
``Receiver``'s: awaiting :meth:`WaitingReceive.result` resumes it from that look.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from ..types import Message


class WaitingReceive:
    """Nothing is held until :meth:`result` is awaited: dropped unawaited, it takes and keeps nothing."""

    __slots__ = ("_resume",)

    def __init__(self, resume: Callable[[Executor | None], Awaitable[list[Message]]]) -> None:
        self._resume = resume

    async def result(self, executor: Executor | None) -> list[Message]:
        """Wait as ``receive_async`` does, from the first look on; each later look runs in ``executor``."""
        return await self._resume(executor)
