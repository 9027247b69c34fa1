"""The audit trail: one row per management call, the CloudTrail analogue (always on).

A call that succeeds writes its row in its own transaction, so the row and
the change commit together.  A call that is refused (a bad argument, a queue
that does not exist, ...) writes its row, with the error's code, in a
transaction after it.  A call that fails because of the file itself (damaged,
locked, full, read-only: a ``DatabaseError``) writes nothing more to it.  Message
operations (send, receive, delete, ...) are not management calls and write none.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pwd
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from .. import limits
from ..engines.base import Connection, Database
from ..errors import DatabaseError, DurableQError
from ..types import AuditEvent, datetime_from_ms

log = logging.getLogger(__name__)

OK = "OK"

_INSERT = (
    'INSERT INTO audit_events (at, pid, "user", action, queue, outcome, detail) '
    "VALUES (:at, :pid, :user, :action, :queue, :outcome, :detail)"
)
_SELECT = 'SELECT id, at, pid, "user", action, queue, outcome, detail FROM audit_events'


def record(
    conn: Connection,
    now: int,
    action: str,
    queue: str | None,
    outcome: str = OK,
    detail: dict[str, Any] | None = None,
) -> None:
    """Write one event (inside the caller's transaction)."""
    conn.execute(
        _INSERT,
        {
            "at": now,
            "pid": os.getpid(),
            "user": _user(),
            "action": action,
            "queue": queue,
            "outcome": outcome,
            "detail": json.dumps(detail, sort_keys=True) if detail else None,
        },
    )


@contextmanager
def failures(db: Database, clock_ms: Callable[[], int], action: str, queue: object) -> Iterator[None]:
    """Around a management call: if it raises a durableq error, record the failure, then re-raise."""
    try:
        yield
    except DatabaseError:
        raise  # the file's own trouble (damaged, locked, full, read-only, closed): write nothing more to it
    except DurableQError as exc:
        name = _storable(queue[: limits.MAX_QUEUE_NAME_LENGTH]) if isinstance(queue, str) else None
        try:
            with db.write() as conn:
                record(conn, clock_ms(), action, name, exc.code)
        except DurableQError:  # the file itself refuses (locked, full, read-only): the call's error wins
            log.warning(
                "could not record the failed %s of %r in the audit trail", action, name, exc_info=True
            )
        raise


class _HasRuntime(Protocol):
    @property
    def _audit_target(self) -> tuple[Database, Callable[[], int]]: ...


P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=_HasRuntime)


def audited(
    action: str, queue: Callable[..., object]
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """A public management method whose failures are recorded (its success is recorded by the
    operation, inside its transaction).  ``queue`` picks the queue's name from the call's arguments."""

    def wrap(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            db, clock_ms = self._audit_target
            with failures(db, clock_ms, action, queue(self, *args, **kwargs)):
                return method(self, *args, **kwargs)

        return call

    return wrap


def events(
    conn: Connection, queue: str | None, since: int | None, after: int | None, limit: int
) -> list[AuditEvent]:
    """Events oldest first: of ``queue`` (any if None), at or after ``since`` (epoch ms), with an id
    above ``after``, at most ``limit``."""
    where, params = [], {"limit": limit}
    if queue is not None:
        where.append("queue = :queue")
        params["queue"] = queue  # type: ignore[assignment]
    if since is not None:
        where.append("at >= :since")
        params["since"] = since
    if after is not None:
        where.append("id > :after")
        params["after"] = after
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(f"{_SELECT}{clause} ORDER BY id LIMIT :limit", params)
    return [
        AuditEvent(
            event_id, datetime_from_ms(at), pid, user, action, queue_name, outcome, json.loads(detail or "{}")
        )
        for event_id, at, pid, user, action, queue_name, outcome, detail in rows
    ]


def _storable(text: str) -> str:
    """``text`` as it can be stored: a refused name may hold lone surrogates, kept as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_users: dict[int, str] = {}


def _user() -> str:
    """The OS user of this process, from its uid (not from $USER, which the process may set)."""
    uid = os.getuid()
    name = _users.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:  # no name for this uid (a container's bare uid)
            name = str(uid)
        _users[uid] = name
    return name
