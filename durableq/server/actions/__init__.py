"""The SQS actions: one function per action, from request members to library calls to result members.

Each action takes a :class:`Call` and returns the result members in the AWS
JSON shape (the query protocol renders the same dict as XML).  A library error
leaves an action as the SQS error for it, in SQS's words (:mod:`..wording`).
A management action runs inside ``Broker.management_call``, so that a refusal
of the endpoint's own (no such queue, an attribute it does not know, a
malformed queue URL) leaves its audit row as the library's refusals do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durableq.errors import DurableQError

from ..errors import WireError, from_action
from . import message_actions, moves, queues
from .call import Call

Action = Callable[[Call], dict[str, Any]]

#: The management actions (docs/concepts.md, "Audit trail") and the member that names each one's queue.
MANAGEMENT: dict[str, str | None] = {
    "CreateQueue": "QueueName",
    "DeleteQueue": "QueueUrl",
    "SetQueueAttributes": "QueueUrl",
    "PurgeQueue": "QueueUrl",
    "TagQueue": "QueueUrl",
    "UntagQueue": "QueueUrl",
    "AddPermission": "QueueUrl",
    "RemovePermission": "QueueUrl",
    "StartMessageMoveTask": "SourceArn",
    "CancelMessageMoveTask": None,
}


def in_sqs_words(name: str, call: Call, exc: DurableQError) -> WireError:
    """The SQS error for a library error raised while ``call`` ran action ``name``."""
    return from_action(exc, call.word(name, exc))


def _in_sqs_words(name: str, action: Action) -> Action:
    def run(call: Call) -> dict[str, Any]:
        try:
            return action(call)
        except DurableQError as exc:
            raise in_sqs_words(name, call, exc) from exc

    return run


def _audited(name: str, action: Action) -> Action:
    member = MANAGEMENT[name]

    def run(call: Call) -> dict[str, Any]:
        with call.broker.management_call(name, _named(call, member), code_of=_refusal):
            return action(call)

    return run


def _named(call: Call, member: str | None) -> str | None:
    """The queue a management request names, as far as it names one (for its audit row)."""
    value = None if member is None else call.params.raw(member)
    if not isinstance(value, str):
        return None
    if member == "SourceArn":
        return value.rpartition(":")[2]  # the name, also of an ARN of another region or account
    if member == "QueueUrl":
        try:
            return call.named_queue()
        except WireError:  # not a URL: the row keeps what the client sent
            return value
    return value


def _refusal(exc: BaseException) -> str | None:
    """A client's mistake the endpoint refuses itself (a malformed queue URL) is a refusal too."""
    return exc.shape if isinstance(exc, WireError) and exc.sender else None


#: Every action of the SQS API (2012-11-05), by name.
ACTIONS: dict[str, Action] = {
    name: _in_sqs_words(name, _audited(name, action) if name in MANAGEMENT else action)
    for name, action in {**queues.ACTIONS, **message_actions.ACTIONS, **moves.ACTIONS}.items()
}

__all__ = ["ACTIONS", "MANAGEMENT", "Action", "Call", "in_sqs_words"]
