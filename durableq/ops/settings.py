"""Queue settings: checking them, and creating or changing queue rows with them.

Most settings change how durableq behaves, the encryption ones included (``sealing.py``).  Two exist
so that SQS clients can store and read them back (the access policy and the FIFO throughput limit);
durableq keeps them but does not act on them: one file has one writer anyway, and whoever can open
the file can use it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import limits, validation
from ..engines.base import Connection
from ..errors import (
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
    QueueNameExists,
    Reason,
)
from ..queue_settings import BY_NAME, SETTABLE, SETTINGS, Setting
from ..types import RedriveAllowPolicy, RedrivePolicy, datetime_from_ms
from .queue_rows import QueueConfig, changed, find, load


def _defaults(fifo: bool) -> dict[str, Any]:
    """The columns a new queue gets unless its settings say otherwise.  A setting durableq acts on
    always has a value in the row; one kept only for SQS clients only where SQS shows it."""
    return {
        s.name: s.default
        for s in SETTINGS
        if s.default is not None and (fifo or not (s.fifo_only and s.sqs_client_only))
    }


#: The ``parameter`` of errors about the redrive and redrive-allow policies.
REDRIVE = "redrive_policy"
ALLOW = "redrive_allow_policy"
# The columns that make two create_queue calls "the same queue" (a temporary queue's idle timeout too).
_IDENTITY = (*(column for s in SETTINGS for column in s.stored_in), "idle_timeout")


def to_columns(fifo: bool, settings: Mapping[str, Any], conn: Connection, name: str) -> dict[str, Any]:
    """Check queue settings (create or set) and return the column values they mean."""
    columns: dict[str, Any] = {}
    for key, value in settings.items():
        setting = BY_NAME.get(key)
        if setting is None:
            raise InvalidAttributeName(
                template="{value!r} is not a queue attribute; settable are {choices}",
                value=key,
                choices=[s.name for s in SETTABLE],
                reason=Reason.UNKNOWN,
            )
        if not setting.settable:
            raise InvalidAttributeName(
                template="a queue's type never changes after creation ({queue!r})",
                parameter=key,
                queue=name,
                reason=Reason.FIXED,
            )
        if setting.fifo_only and not fifo:
            raise InvalidAttributeName(
                template="{parameter} applies to FIFO queues only; {queue!r} is a standard queue",
                parameter=key,
                queue=name,
                reason=Reason.FIFO_ONLY,
            )
        columns.update(_checked(setting, value, conn, name, fifo))
    if columns.get("kms_master_key_id") and "sqs_managed_sse_enabled" not in settings:
        columns["sqs_managed_sse_enabled"] = False  # a KMS key replaces SQS-managed encryption
    if columns.get("kms_master_key_id") or columns.get("sqs_managed_sse_enabled"):
        columns["sealed"] = True  # from now on the queue may hold encrypted rows (never cleared)
    return columns


def _checked(setting: Setting, value: object, conn: Connection, name: str, fifo: bool) -> dict[str, Any]:
    """The columns of one setting's value, checked."""
    key = setting.name
    if key == "redrive_policy":
        return _redrive_columns(conn, name, fifo, value)
    if key == "redrive_allow_policy":
        return _allow_columns(value)
    if key == "policy":
        return {key: _policy(value)}
    if key == "kms_master_key_id":
        return {key: _kms_key(value)}
    if setting.choices is not None:
        return {key: validation.choice(key, value, setting.choices, InvalidAttributeValue)}
    if setting.kind is bool:
        if not isinstance(value, bool):
            raise InvalidAttributeValue(
                template="{parameter} must be True or False; got {value!r}",
                parameter=key,
                value=value,
                reason=Reason.TYPE,
            )
        return {key: value}
    assert setting.kind is int and setting.low is not None and setting.high is not None
    unit = setting.unit or ""
    return {key: validation.integer(key, value, setting.low, setting.high, unit, InvalidAttributeValue)}


def _check_combination(queue: Mapping[str, Any], name: str) -> None:
    """Rules between settings, checked on the queue as it would be."""
    if queue.get("kms_master_key_id") and queue.get("sqs_managed_sse_enabled"):
        raise InvalidAttributeValue(
            template="queue {queue!r} can use one kind of server-side encryption: "
            "a KMS key or SQS-managed, not both",
            parameter="kms_master_key_id",
            names=["sqs_managed_sse_enabled"],
            queue=name,
            reason=Reason.CONFLICT,
        )
    if (
        queue.get("fifo_throughput_limit") == "perMessageGroupId"
        and queue.get("deduplication_scope") != "messageGroup"
    ):
        raise InvalidAttributeValue(
            template="{parameter} perMessageGroupId needs {names[0]} messageGroup",
            parameter="fifo_throughput_limit",
            names=["deduplication_scope"],
            queue=name,
            reason=Reason.CONFLICT,
        )


def _redrive_columns(conn: Connection, name: str, fifo: bool, policy: object) -> dict[str, Any]:
    if policy is None:
        return {"dead_letter_queue": None, "max_receive_count": None}
    if not isinstance(policy, RedrivePolicy):
        raise InvalidAttributeValue(
            template=f"{{parameter}} must be a durableq.RedrivePolicy or None; got {type(policy).__name__}",
            parameter=REDRIVE,
            value=policy,
            reason=Reason.TYPE,
        )
    count = validation.integer(
        "max_receive_count",
        policy.max_receive_count,
        limits.MIN_MAX_RECEIVE_COUNT,
        limits.MAX_MAX_RECEIVE_COUNT,
        "receives",
        InvalidAttributeValue,
    )
    target_name = policy.dead_letter_queue
    try:
        validation.queue_name(target_name)
    except InvalidParameterValue as exc:
        raise InvalidAttributeValue(
            template="{dead_letter_queue}: " + exc.template,
            parameter=REDRIVE,
            value=exc.value,
            high=exc.high,
            reason=exc.reason,
        ) from None
    fields: dict[str, Any] = {"parameter": REDRIVE, "value": target_name, "queue": name}
    if target_name == name:
        raise InvalidAttributeValue(
            template="queue {queue!r} cannot be its own dead-letter queue", reason=Reason.CONFLICT, **fields
        )
    target = find(conn, target_name)
    if target is None:
        raise InvalidAttributeValue(
            template="dead-letter queue {value!r} does not exist; create it first",
            reason=Reason.NOT_FOUND,
            **fields,
        )
    if target.fifo != fifo:
        kind = "FIFO" if fifo else "standard"
        raise InvalidAttributeValue(
            template=f"the dead-letter queue of a {kind} queue must be {kind} too; {{value!r}} is not",
            reason=Reason.CONFLICT,
            **fields,
        )
    allow = target.redrive_allow_policy
    if allow is not None and (
        allow.permission == "denyAll" or (allow.permission == "byQueue" and name not in allow.source_queues)
    ):
        raise InvalidAttributeValue(
            template=f"the redrive-allow policy of {{value!r}} ({allow.permission}) does not let "
            "{queue!r} use it as a dead-letter queue",
            reason=Reason.CONFLICT,
            **fields,
        )
    return {"dead_letter_queue": target_name, "max_receive_count": count}


def _allow_columns(policy: object) -> dict[str, Any]:
    if policy is None:
        return {"redrive_permission": None, "redrive_source_queues": None}
    if not isinstance(policy, RedriveAllowPolicy):
        raise InvalidAttributeValue(
            template="{parameter} must be a durableq.RedriveAllowPolicy or None; "
            f"got {type(policy).__name__}",
            parameter=ALLOW,
            value=policy,
            reason=Reason.TYPE,
        )
    permission = policy.permission
    if not isinstance(permission, str) or permission not in limits.REDRIVE_PERMISSIONS:
        raise InvalidAttributeValue(
            template="{parameter} permission must be one of {choices}; got {value!r}",
            parameter=ALLOW,
            value=permission,
            choices=limits.REDRIVE_PERMISSIONS,
            reason=Reason.CHOICE,
        )
    sources = validation.names("source_queues", policy.source_queues)
    if permission == "byQueue":
        if not 1 <= len(sources) <= limits.MAX_REDRIVE_SOURCE_QUEUES:
            raise InvalidAttributeValue(
                template="permission byQueue needs 1 to {high} source queues; got {value}",
                parameter=ALLOW,
                value=len(sources),
                high=limits.MAX_REDRIVE_SOURCE_QUEUES,
                reason=Reason.CONFLICT,
            )
    elif sources:
        raise InvalidAttributeValue(
            template=f"source_queues are only allowed with permission byQueue, not {permission}",
            parameter=ALLOW,
            reason=Reason.CONFLICT,
        )
    return {
        "redrive_permission": permission,
        "redrive_source_queues": json.dumps(sorted(set(sources))) if sources else None,
    }


def _policy(value: object) -> str | None:
    """An access policy: a JSON object, kept as given (durableq enforces no IAM)."""
    if value is None or value == "":
        return None
    value = validation.text("policy", value, InvalidAttributeValue)
    if len(value.encode()) > limits.MAX_POLICY_BYTES:
        raise InvalidAttributeValue(
            template="{parameter} must be a JSON document of at most {high} bytes",
            parameter="policy",
            value=len(value.encode()),
            high=limits.MAX_POLICY_BYTES,
            reason=Reason.TOO_LARGE,
        )
    try:
        document = json.loads(value)
    except ValueError as exc:
        raise InvalidAttributeValue(
            f"policy is not valid JSON: {exc}", parameter="policy", reason=Reason.FORM
        ) from exc
    if not isinstance(document, dict):
        raise InvalidAttributeValue(
            template="{parameter} must be a JSON object", parameter="policy", reason=Reason.FORM
        )
    return value


def _kms_key(value: object) -> str | None:
    if value is None or value == "":
        return None
    value = validation.text("kms_master_key_id", value, InvalidAttributeValue)
    if len(value) > limits.MAX_KMS_KEY_ID_LENGTH:
        raise InvalidAttributeValue(
            template="{parameter} must be a key id, alias or ARN of at most {high} characters",
            parameter="kms_master_key_id",
            high=limits.MAX_KMS_KEY_ID_LENGTH,
            reason=Reason.FORM,
        )
    return value


def create(
    conn: Connection,
    name: str,
    fifo: bool,
    settings: Mapping[str, Any],
    now: int,
    idle_timeout: int | None = None,
) -> tuple[QueueConfig, bool]:
    """Create the queue, or return the existing identical one; the flag says if it is new.
    ``idle_timeout`` makes it a temporary queue (see ``temporary.py``)."""
    given = {"fifo": fifo, **to_columns(fifo, settings, conn, name)}
    if idle_timeout is not None:
        given["idle_timeout"] = idle_timeout
    columns = {**_defaults(fifo), **given}
    _check_combination(columns, name)
    existing = find(conn, name)
    if existing is not None:
        differing = [c for c in _IDENTITY if c in given and getattr(existing, c) != given[c]]
        if differing:
            raise QueueNameExists(
                template="queue {queue!r} exists with other attributes ({names}); "
                "use {set_attributes} to change them or another name",
                parameter=differing[0],
                names=differing,
                queue=name,
                reason=Reason.EXISTS,
            )
        return existing, False
    columns.update(name=name, created_at=now, last_modified=now)
    names = ", ".join(columns)
    placeholders = ", ".join(f":{c}" for c in columns)
    conn.execute(f"INSERT INTO durableq_queues ({names}) VALUES ({placeholders})", columns)
    changed(conn)
    return load(conn, name), True


def update(conn: Connection, queue: QueueConfig, changes: Mapping[str, Any], now: int) -> None:
    columns = to_columns(queue.fifo, changes, conn, queue.name)
    if not columns:
        return
    _check_combination({**vars_of(queue), **columns}, queue.name)
    columns["last_modified"] = now
    assignments = ", ".join(f"{c} = :{c}" for c in columns)
    conn.execute(f"UPDATE durableq_queues SET {assignments} WHERE id = :id", {**columns, "id": queue.id})
    changed(conn)


def vars_of(queue: QueueConfig) -> dict[str, Any]:
    return {name: getattr(queue, name) for name in _IDENTITY}


def attributes(queue: QueueConfig) -> dict[str, Any]:
    """The public view of a queue's settings (``Queue.attributes()``); a FIFO queue's own come last."""
    result: dict[str, Any] = {
        "name": queue.name,
        "fifo": queue.fifo,
        **{s.name: getattr(queue, s.name) for s in SETTABLE if not s.fifo_only},
        **({"idle_timeout": queue.idle_timeout} if queue.idle_timeout is not None else {}),
        "created_at": datetime_from_ms(queue.created_at),
        "last_modified": datetime_from_ms(queue.last_modified),
    }
    if queue.fifo:
        result.update({s.name: getattr(queue, s.name) for s in SETTABLE if s.fifo_only})
    return result
