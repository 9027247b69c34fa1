"""Driving a receive's steps from a coroutine: each look in an executor thread, each wait on the
event loop, and a clean end however the coroutine ends.

A look already running in a thread when its receive is cancelled (the endpoint's client hung up,
the server stops) cannot be stopped: :func:`drive` waits for it, and what it claimed goes back
(``put_back``), uncounted, so a receiver that left takes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from concurrent.futures import Executor

from ..aio import outlast
from ..types import Message
from .longpoll import AsyncWaiter

log = logging.getLogger(__name__)

#: One step of a receive: the seconds it may wait for its waiter to be woken, or the result.
Steps = Generator[float, None, list[Message]]
_Step = tuple[bool, float | list[Message]]


async def drive(
    steps: Steps,
    waiter: AsyncWaiter,
    executor: Executor | None,
    put_back: Callable[[list[Message]], None],
    name: str,
) -> list[Message]:
    """Run the steps of a receive from queue ``name`` to their result; ``put_back(messages)`` undoes
    the claims of a look that ran on after the receive was abandoned."""
    loop = asyncio.get_running_loop()
    stepper = _Stepper(steps)
    step: asyncio.Future[_Step] | None = None
    try:
        while True:
            step = loop.run_in_executor(executor, stepper.step)
            done, value = await asyncio.shield(step)  # cancelled, the look still runs: see _settle
            step = None
            if done:
                return value  # type: ignore[return-value]
            await waiter.wait(value)  # type: ignore[arg-type]
    except BaseException:
        stepper.abandon()  # cancelled (the client left, the server stops) or failed
        if step is not None:
            await _settle(step, loop, executor, put_back, name)
        raise


async def _settle(
    step: asyncio.Future[_Step],
    loop: asyncio.AbstractEventLoop,
    executor: Executor | None,
    put_back: Callable[[list[Message]], None],
    name: str,
) -> None:
    """The look that ran when its receive was abandoned ends first (a thread cannot be stopped);
    what it claimed goes back, uncounted: a receiver that left takes nothing."""
    await outlast(step)
    if step.cancelled() or step.exception() is not None:
        return
    done, value = step.result()
    if not (done and value):
        return
    messages: list[Message] = value  # type: ignore[assignment]
    # The given executor, else the loop's own: the endpoint's pool refuses work when full
    # (PoolBusy), and a shut-down one refuses everything (RuntimeError); last, this thread.
    for pool in (executor, None):
        try:
            back = loop.run_in_executor(pool, put_back, messages)
            break
        except Exception:  # noqa: BLE001 - refused: the next way
            continue
    else:
        back = loop.create_future()
        try:
            put_back(messages)
            back.set_result(None)
        except Exception as exc:  # noqa: BLE001 - reported below, as a pool thread's failure is
            back.set_exception(exc)
    await outlast(back)
    if not back.cancelled() and (failed := back.exception()) is not None:
        # Not put back: they come back when their visibility timeout ends, as a lost answer's would.
        log.warning("could not put back %d messages of %r: %s", len(messages), name, failed)


class _Stepper:
    """Runs the steps of an async receive in executor threads, and closes them however the receive ends."""

    __slots__ = ("_abandoned", "_steps")

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self._abandoned = False

    def step(self) -> _Step:
        try:
            result: _Step = (False, next(self._steps))
        except StopIteration as done:
            return True, done.value
        if self._abandoned:  # abandoned while this step ran: nobody will resume it
            self._steps.close()
        return result

    def abandon(self) -> None:
        self._abandoned = True  # first: a step running now closes the steps itself when it ends
        try:
            self._steps.close()  # runs the generator's clean-up: leaves the room
        except ValueError:
            pass  # "generator already executing": that step closes it
