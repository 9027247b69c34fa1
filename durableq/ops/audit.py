"""The audit trail: one row per management call, the CloudTrail analogue (always on).

A call that succeeds writes its row in its own transaction, so the row and
the change commit together.  A call that is refused (a bad argument, a queue
that does not exist, ...) writes its row, with the error's code, in a
transaction after it.  A call that fails because of the file itself (damaged,
locked, full, read-only: a ``DatabaseError``) writes nothing more to it.  Message
operations (send, receive, delete, ...) are not management calls and write none.

Each call's action is named once, by :func:`audited` on the library's public method; the operation
the method calls writes the success row with :func:`succeeded`, which takes the action (and the queue)
from the call in progress.

Who writes a refusal's row: :func:`management_call`, around the call at every
layer that makes it: the library's public method (:func:`audited`), and the CLI
command or endpoint action that looks the queue up and checks its own arguments
before calling it (``Broker.management_call``).  The row is written once, by the
innermost layer the call reached: once the library's method is entered, its row
(success or refusal) is the call's, and the layers around it write nothing more;
a refusal before that (no such queue, an attribute the endpoint does not know)
is written by the layer that refused it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pwd
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from .. import limits
from ..engines.base import Connection, Database
from ..errors import DatabaseError, DurableQError
from ..types import AuditEvent, datetime_from_ms

log = logging.getLogger(__name__)

OK = "OK"

_INSERT = (
    'INSERT INTO durableq_audit_events (at, pid, "user", action, queue, outcome, detail) '
    "VALUES (:at, :pid, :user, :action, :queue, :outcome, :detail)"
)
_SELECT = 'SELECT id, at, pid, "user", action, queue, outcome, detail FROM durableq_audit_events'


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


def refusal(exc: BaseException, code_of: Callable[[BaseException], str | None] | None = None) -> str | None:
    """The outcome a management call refused with ``exc`` records, None for no row: a durableq error's
    code, but nothing for the file's own trouble (``DatabaseError``); for another error, what
    ``code_of`` says (a program's own refusals), else nothing (a bug is not a refusal)."""
    if isinstance(exc, DurableQError):
        return None if isinstance(exc, DatabaseError) else exc.code
    return None if code_of is None else code_of(exc)


class _Call:
    """A management call in progress in this thread (or task) at one layer: its action, the queue it
    names, and whether a layer inside it was entered."""

    __slots__ = ("action", "queue", "reached")

    def __init__(self, action: str, queue: object) -> None:
        self.action = action
        self.queue = queue
        self.reached = False


_calls: ContextVar[_Call | None] = ContextVar("durableq_management_call", default=None)


@contextmanager
def management_call(
    db: Database,
    clock_ms: Callable[[], int],
    action: str,
    queue: object,
    code_of: Callable[[BaseException], str | None] | None = None,
) -> Iterator[None]:
    """Around one management call at one layer: if it raises before any layer inside it was entered,
    record the refusal (see :func:`refusal` for its outcome and ``code_of``), then re-raise."""
    outer = _calls.get()
    if outer is not None:
        outer.reached = True  # the layer around this one leaves the row to this one
    this = _Call(action, queue)
    token = _calls.set(this)
    try:
        yield
    except BaseException as exc:
        code = None if this.reached else refusal(exc, code_of)
        if code is not None:
            _record_refusal(db, clock_ms, action, queue, code)
        raise
    finally:
        _calls.reset(token)


def succeeded(
    conn: Connection, now: int, detail: dict[str, Any] | None = None, *, queue: str | None = None
) -> None:
    """Write the success row of the management call in progress (inside the operation's transaction):
    the action its method declares (:func:`audited`), for the queue the call names unless ``queue``
    says which (a temporary queue's full name, a task's source queue)."""
    call = _calls.get()
    if call is None:  # an operation that writes a call's row runs inside that call's method
        raise RuntimeError("audit.succeeded() outside a management call")
    name = call.queue if queue is None else queue
    record(conn, now, call.action, name if isinstance(name, str) else None, detail=detail)


def _record_refusal(db: Database, clock_ms: Callable[[], int], action: str, queue: object, code: str) -> None:
    name = _storable(queue[: limits.MAX_QUEUE_NAME_LENGTH]) if isinstance(queue, str) else None
    try:
        with db.write() as conn:
            record(conn, clock_ms(), action, name, code)
    except DurableQError:  # the file itself refuses (locked, full, read-only): the call's error wins
        log.warning("could not record the failed %s of %r in the audit trail", action, name, exc_info=True)


class _HasRuntime(Protocol):
    @property
    def _audit_target(self) -> tuple[Database, Callable[[], int]]: ...


P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=_HasRuntime)
#: Where :func:`audited` keeps a method's action, for :func:`action_of`.
_AUDITED = "__durableq_audited__"


def audited(
    action: str, queue: Callable[..., object]
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """A public management method: the one declaration of its ``action``.  Its refusals are recorded
    here; its success by the operation it calls (:func:`succeeded`, inside the operation's
    transaction).  ``queue`` picks the queue's name from the call's arguments."""

    def wrap(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            db, clock_ms = self._audit_target
            with management_call(db, clock_ms, action, queue(self, *args, **kwargs)):
                return method(self, *args, **kwargs)

        setattr(call, _AUDITED, action)
        return call

    return wrap


def action_of(method: object) -> str | None:
    """The action an :func:`audited` method declares (None: it is not a management call)."""
    action = getattr(method, _AUDITED, None)
    return action if isinstance(action, str) else None


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
    """``text`` as every engine can store it: a refused name may hold lone surrogates, kept as
    ``\\udXXX``, and NUL, which PostgreSQL's text cannot hold, kept as ``\\x00``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


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
