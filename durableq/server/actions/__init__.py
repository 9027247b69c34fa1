"""The SQS actions: one function per action, from request members to library calls to result members.

Each action takes a :class:`Call` and returns the result members in the AWS
JSON shape (the query protocol renders the same dict as XML).  A library error
leaves an action as the SQS error for it, in SQS's words (:mod:`..wording`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durableq.errors import DurableQError

from ..errors import from_action
from . import messages, moves, queues
from .call import Call

Action = Callable[[Call], dict[str, Any]]


def _in_sqs_words(name: str, action: Action) -> Action:
    def run(call: Call) -> dict[str, Any]:
        try:
            return action(call)
        except DurableQError as exc:
            raise from_action(exc, call.reword(name, exc.code, exc.message)) from exc

    return run


#: Every action of the SQS API (2012-11-05), by name.
ACTIONS: dict[str, Action] = {
    name: _in_sqs_words(name, action)
    for name, action in {**queues.ACTIONS, **messages.ACTIONS, **moves.ACTIONS}.items()
}

__all__ = ["ACTIONS", "Action", "Call"]
