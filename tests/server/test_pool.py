"""The endpoint's pool: its bound, its hand-off to the loop, and what happens to cancelled calls."""

from __future__ import annotations

import asyncio
import threading

import pytest

from durableq.server.pool import BoundedPool, PoolBusy
from tests.conftest import until_async


def test_a_call_comes_back_to_the_loop_with_its_value_or_its_error() -> None:
    pool = BoundedPool(2, 0)

    async def scenario() -> None:
        assert await pool.run(sum, (1, 2, 3)) == 6
        with pytest.raises(ZeroDivisionError):
            await pool.run(divmod, 1, 0)
        assert await asyncio.get_running_loop().run_in_executor(pool, max, 4, 5) == 5

    try:
        asyncio.run(scenario())
    finally:
        pool.shutdown()
    assert pool.outstanding == 0


def test_a_call_with_a_callback_runs_in_a_thread_and_calls_back_on_the_loop() -> None:
    """``call``: the function in a pool thread, its outcome handed to ``then`` on the loop's thread."""
    pool = BoundedPool(1, 0)

    async def scenario() -> list[tuple[object, object, bool]]:
        loop_thread = threading.get_ident()
        outcomes: list[tuple[object, object, bool]] = []
        done = asyncio.Event()

        def then(value: object, exc: BaseException | None) -> None:
            outcomes.append((value, type(exc), threading.get_ident() == loop_thread))
            if len(outcomes) == 2:
                done.set()

        gate = threading.Event()

        def held() -> int:
            gate.wait(30)
            return threading.get_ident()

        pool.call(held, (), then)
        with pytest.raises(PoolBusy):  # one thread, no waiting room: the second is refused at once
            pool.call(sum, ((1, 2),), then)
        gate.set()
        await until_async(lambda: pool.outstanding == 0, "the call has left the pool")
        pool.call(divmod, (1, 0), then)
        await done.wait()
        return outcomes

    try:
        (ident, no_error, on_loop), (nothing, error, also_on_loop) = asyncio.run(scenario())
    finally:
        pool.shutdown()
    assert ident != threading.get_ident() and no_error is type(None) and on_loop
    assert nothing is None and error is ZeroDivisionError and also_on_loop


def test_a_light_load_keeps_to_one_thread() -> None:
    """Calls one after another run on the thread idle last (its SQLite connection is the warm one)."""
    pool = BoundedPool(8, 0)

    async def scenario() -> set[int]:
        return {await pool.run(threading.get_ident) for _ in range(50)}

    try:
        assert len(asyncio.run(scenario())) == 1
    finally:
        pool.shutdown()


def test_past_its_bound_a_call_is_refused_and_a_cancelled_one_never_runs() -> None:
    pool = BoundedPool(1, 1)
    release = threading.Event()
    ran: list[str] = []

    async def scenario() -> None:
        busy = asyncio.ensure_future(pool.run(release.wait, 30))
        queued = asyncio.ensure_future(pool.run(ran.append, "queued"))
        await asyncio.sleep(0)  # both handed to the pool: one running, one waiting for the thread
        assert pool.outstanding == 2
        with pytest.raises(PoolBusy):
            await pool.run(ran.append, "refused")
        queued.cancel()  # its request went away while it waited for a thread
        release.set()
        assert await busy is True
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert await pool.run(ran.append, "after") is None

    try:
        asyncio.run(scenario())
    finally:
        pool.shutdown()
    assert ran == ["after"]
    assert pool.outstanding == 0


def test_shutdown_runs_what_was_taken_and_refuses_the_rest() -> None:
    pool = BoundedPool(1, 4)
    release = threading.Event()
    done: list[int] = []
    futures = [pool.submit(release.wait, 30), *(pool.submit(done.append, i) for i in range(3))]
    stopping = threading.Thread(target=pool.shutdown)
    stopping.start()
    release.set()
    stopping.join(30)
    assert not stopping.is_alive()
    assert [f.result(0) for f in futures] == [True, None, None, None]
    assert done == [0, 1, 2]
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(done.append, 9)
