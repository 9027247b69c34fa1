"""asyncio helpers shared by the library and its servers."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def outlast(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever cancels the waiting task meanwhile.

    For clean-up that must not be cut short: work already running in a thread cannot be stopped,
    so a cancelled caller waits for it before deciding what it did.  The caller re-raises its own
    cancellation afterwards."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((future,))
