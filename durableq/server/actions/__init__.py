"""The SQS actions: one function per action, from request members to library calls to result members.

Each action takes a :class:`Call` and returns the result members in the AWS
JSON shape (the query protocol renders the same dict as XML).  Library errors
propagate; the protocol layer turns them into SQS errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import messages, moves, queues
from .call import Call

Action = Callable[[Call], dict[str, Any]]

#: Every action of the SQS API (2012-11-05), by name.
ACTIONS: dict[str, Action] = {**queues.ACTIONS, **messages.ACTIONS, **moves.ACTIONS}

__all__ = ["ACTIONS", "Action", "Call"]
