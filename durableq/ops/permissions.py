"""Permissions (SQS AddPermission / RemovePermission): statements of the queue's access policy.

durableq enforces no IAM — anyone who can open the file can use it — but it
keeps the policy SQS clients write and read, with the same checks SQS makes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .. import limits
from ..engines.base import Connection
from ..errors import InvalidParameterValue, MissingParameter, OverLimit, Reason
from . import settings
from .queue_rows import QueueConfig

ACTIONS = (
    "*",
    "ChangeMessageVisibility",
    "DeleteMessage",
    "GetQueueAttributes",
    "GetQueueUrl",
    "ListDeadLetterSourceQueues",
    "ListQueueTags",
    "PurgeQueue",
    "ReceiveMessage",
    "SendMessage",
)
_LABEL = re.compile(r"[A-Za-z0-9_-]+")
_ACCOUNT = re.compile(r"\d{12}")


def _document(queue: QueueConfig, resource: str) -> dict[str, Any]:
    """The queue's policy, or SQS's default policy document for ``resource`` (the queue's ARN)."""
    if queue.policy:
        return json.loads(queue.policy)  # type: ignore[no-any-return]
    return {"Version": "2012-10-17", "Id": f"{resource}/SQSDefaultPolicy", "Statement": []}


def _one_or_list(values: list[str]) -> str | list[str]:
    # SQS writes a single principal or action as a string, several as a list.
    return values[0] if len(values) == 1 else values


def _text(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))  # compact, as SQS returns its policies


def add(
    conn: Connection,
    queue: QueueConfig,
    label: object,
    account_ids: Sequence[object],
    actions: Sequence[object],
    resource: str,
    now: int,
) -> None:
    """Add a statement allowing ``actions`` to ``account_ids``, named ``label``."""
    if (
        not isinstance(label, str)
        or not 1 <= len(label) <= limits.MAX_PERMISSION_LABEL_LENGTH
        or not _LABEL.fullmatch(label)
    ):
        raise InvalidParameterValue(
            f"permission label {label!r} is not allowed: use 1 to {limits.MAX_PERMISSION_LABEL_LENGTH} "
            "characters of A-Z a-z 0-9 _ -"
        )
    if not actions:
        raise MissingParameter(
            "add_permission needs at least one action", parameter="actions", reason=Reason.MISSING
        )
    if not account_ids:
        raise MissingParameter(
            "add_permission needs at least one account id", parameter="account_ids", reason=Reason.MISSING
        )
    if len(actions) > limits.MAX_PERMISSION_ACTIONS:
        raise OverLimit(
            template="a permission allows at most {high} actions; got {value}",
            parameter="actions",
            value=len(actions),
            high=limits.MAX_PERMISSION_ACTIONS,
            reason=Reason.TOO_MANY,
        )
    for account in account_ids:
        if not isinstance(account, str) or not _ACCOUNT.fullmatch(account):
            raise InvalidParameterValue(f"account id {account!r} is not allowed: use 12 digits")
    for action in actions:
        if action not in ACTIONS:
            raise InvalidParameterValue(
                template="action {value!r} is not allowed; allowed are {choices}",
                parameter="actions",
                value=action,
                choices=ACTIONS,
                reason=Reason.CHOICE,
            )
    document = _document(queue, resource)
    if any(statement.get("Sid") == label for statement in document.get("Statement", [])):
        raise InvalidParameterValue(
            template="a permission labelled {value!r} already exists on {queue!r}",
            parameter="label",
            value=label,
            queue=queue.name,
            reason=Reason.EXISTS,
        )
    document.setdefault("Statement", []).append(
        {
            "Sid": label,
            "Effect": "Allow",
            "Principal": {"AWS": _one_or_list([f"arn:aws:iam::{account}:root" for account in account_ids])},
            "Action": _one_or_list([f"SQS:{action}" for action in actions]),
            "Resource": resource,
        }
    )
    settings.update(conn, queue, {"policy": _text(document)}, now)


def remove(conn: Connection, queue: QueueConfig, label: object, now: int) -> None:
    """Remove the statement named ``label``."""
    document = _document(queue, queue.name)
    statements = document.get("Statement", [])
    kept = [s for s in statements if s.get("Sid") != label]
    if len(kept) == len(statements):
        raise InvalidParameterValue(
            template="queue {queue!r} has no permission labelled {value!r}",
            parameter="label",
            value=label,
            queue=queue.name,
            reason=Reason.NOT_FOUND,
        )
    document["Statement"] = kept
    settings.update(conn, queue, {"policy": _text(document) if kept else None}, now)
