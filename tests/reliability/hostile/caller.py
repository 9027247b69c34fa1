"""``Caller``: makes one call with what it is expected to do, and journals how it went.

A ``call`` line per call: ``op``, and ``o`` = ``ok`` (returned), ``exp`` (raised
one of the errors the call may meet), ``judged`` (a DurableQError of a
journaled call on a checked queue: the checker decides) or ``bad`` (anything
else: an exception that is not a DurableQError, a TypeError where the
arguments had the right types, a DurableQError the call could not
legitimately meet, or a return where the call must fail), with the error's
type, text and the end of its traceback.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import durableq

from ..journal import Journal

T = TypeVar("T")


class Busy:
    """What each thread of a process is doing and since when (the watchdog reads it)."""

    def __init__(self) -> None:
        self.calls: dict[int, tuple[str, float]] = {}

    def enter(self, op: str) -> None:
        self.calls[threading.get_ident()] = (op, time.monotonic())

    def leave(self) -> None:
        self.calls.pop(threading.get_ident(), None)

    def overdue(self, seconds: float) -> list[tuple[int, str, float]]:
        now = time.monotonic()
        return [
            (ident, op, now - since)
            for ident, (op, since) in list(self.calls.items())
            if now - since > seconds
        ]


def describe(exc: BaseException) -> dict[str, str]:
    """An exception as a journal line keeps it: its type, its text and where it came from."""
    frames = traceback.format_exception(exc)
    return {
        "err": f"{type(exc).__module__}.{type(exc).__name__}",
        "msg": str(exc)[:500],
        "tb": "".join(frames[-4:])[-1500:],
    }


class Caller:
    """Journals every call it makes through :meth:`call` (see the module)."""

    #: Errors every call of this caller may meet besides its own (a broker with a tiny busy timeout).
    tolerated: tuple[str, ...] = ()
    #: Exceptions that mean the call got no answer (the endpoint was killed): journaled as ``cut``.
    cut_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, journal: Journal, busy: Busy) -> None:
        self.journal = journal
        self.busy = busy

    def bad(self, op: str, what: BaseException | str) -> None:
        fields = describe(what) if isinstance(what, BaseException) else {"err": "broken promise", "msg": what}
        self.journal.write("call", op=op, o="bad", th=threading.current_thread().name, **fields)

    def call(
        self,
        op: str,
        function: Callable[[], T],
        expect: Iterable[str] = (),
        *,
        fail: bool = False,
        wrong_types: bool = False,
        judged: bool = False,
    ) -> T | None:
        """Run ``function``; journal its outcome.  ``expect``: the error codes it may raise;
        ``fail``: it must raise one of them; ``wrong_types``: its arguments have the wrong Python
        types (a TypeError is then allowed); ``judged``: it is a journaled call on a checked queue,
        whose DurableQErrors the checker judges.  Returns the result, or None if it raised."""
        expected = set(expect) | set(self.tolerated)
        self.busy.enter(op)
        try:
            result = function()
        except durableq.DurableQError as exc:
            if judged:
                self.journal.write("call", op=op, o="judged", code=exc.code)
            elif exc.code in expected:
                self.journal.write("call", op=op, o="exp", code=exc.code)
            else:
                self.bad(op, exc)
            return None
        except TypeError as exc:
            if wrong_types:
                self.journal.write("call", op=op, o="exp", code="TypeError")
            else:
                self.bad(op, exc)
            return None
        except self.cut_errors as exc:
            self.journal.write("call", op=op, o="cut", code=type(exc).__name__)
            return None
        except Exception as exc:  # noqa: BLE001 - the point: anything else is a broken promise
            self.bad(op, exc)
            return None
        finally:
            self.busy.leave()
        if fail:
            self.bad(op, f"returned {result!r:.200} instead of raising one of {sorted(expected)}")
        else:
            self.journal.write("call", op=op, o="ok")
        return result

    def check(self, op: str, condition: bool, what: str) -> None:
        """A promise about a returned result; journaled as ``bad`` when it does not hold."""
        if not condition:
            self.bad(op, what)


def pick(rng: Any, table: list[tuple[float, Callable[[], object]]]) -> Callable[[], object]:
    """A call from ``table`` of (weight, call), drawn by weight."""
    total = sum(weight for weight, _ in table)
    roll = rng.uniform(0, total)
    for weight, function in table:
        roll -= weight
        if roll <= 0:
            return function
    return table[-1][1]
