"""Child processes for the multi-process workloads (W4, W6, W7).

Children are started with *spawn*: each imports and opens its system from
scratch, as a real separate program would, and inherits no SQLite
connection or lock state from the harness.  A barrier holds everyone until
every child has opened its system, so start-up never counts in a timing.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import queue
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

#: The spawn context; workloads make their shared values and queues from it too.
CONTEXT: multiprocessing.context.SpawnContext = multiprocessing.get_context("spawn")

#: A child's work: called as ``work(ready, *args)``; it calls ``ready()`` once it is set up.
Task = tuple[Callable[..., Any], tuple[Any, ...]]


def _child(index: int, work: Callable[..., Any], args: tuple[Any, ...], barrier: Any, results: Any) -> None:
    try:
        value = work(lambda: barrier.wait(), *args)
    except BaseException:  # noqa: BLE001 - every failure goes back to the parent
        barrier.abort()  # release the others rather than leave them waiting
        results.put((index, False, traceback.format_exc()))
    else:
        results.put((index, True, value))


def run(tasks: Sequence[Task], timeout: float) -> tuple[list[Any], float]:
    """Run every task in its own process; returns their results (in task order) and the
    ``time.monotonic()`` at which all of them were ready (CLOCK_MONOTONIC is system-wide)."""
    barrier = CONTEXT.Barrier(len(tasks) + 1)
    results = CONTEXT.Queue()
    processes = [
        CONTEXT.Process(target=_child, args=(i, work, args, barrier, results), daemon=True)
        for i, (work, args) in enumerate(tasks)
    ]
    for process in processes:
        process.start()
    collected: dict[int, Any] = {}
    try:
        barrier.wait(timeout)
        started = time.monotonic()
        # Drain before joining: a child cannot exit while its large result sits in the pipe.
        while len(collected) < len(tasks):
            index, ok, value = results.get(timeout=timeout)
            if not ok:
                raise RuntimeError(f"a benchmark child process failed:\n{value}")
            collected[index] = value
    except (queue.Empty, threading.BrokenBarrierError) as exc:
        # A child that failed before the barrier broke it: show its traceback, not just "broken".
        failures: list[str] = []
        try:
            while len(failures) < len(tasks):
                failures.append(str(results.get(timeout=5)[2]))
        except queue.Empty:
            pass
        exits = ", ".join(str(p.exitcode) for p in processes)
        detail = "\n".join(failures or [f"{exc!r}; exit codes so far: {exits}"])
        raise RuntimeError(f"benchmark child processes did not finish:\n{detail}") from exc
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
    return [collected[i] for i in range(len(tasks))], started
