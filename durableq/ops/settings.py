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

from .. import limits
from ..engines.base import Connection
from ..errors import InvalidAttributeName, InvalidAttributeValue, InvalidParameterValue, QueueNameExists
from ..queue_settings import BY_NAME, SETTABLE, SETTINGS, Setting
from ..types import RedriveAllowPolicy, RedrivePolicy, datetime_from_ms
from . import validation
from .queue_rows import QueueConfig, changed, find, load


def _defaults(fifo: bool) -> dict[str, Any]:
    """The columns a new queue gets unless its settings say otherwise.  A setting durableq acts on
    always has a value in the row; one kept only for SQS clients only where SQS shows it."""
    return {
        s.name: s.default
        for s in SETTINGS
        if s.default is not None and (fifo or not (s.fifo_only and s.sqs_client_only))
    }


# The columns that make two create_queue calls "the same queue" (a temporary queue's idle timeout too).
_IDENTITY = (*(column for s in SETTINGS for column in s.stored_in), "idle_timeout")


def to_columns(fifo: bool, settings: Mapping[str, Any], conn: Connection, name: str) -> dict[str, Any]:
    """Check queue settings (create or set) and return the column values they mean."""
    columns: dict[str, Any] = {}
    for key, value in settings.items():
        setting = BY_NAME.get(key)
        if setting is None:
            raise InvalidAttributeName(
                f"{key!r} is not a queue attribute; settable are {', '.join(s.name for s in SETTABLE)}"
            )
        if not setting.settable:
            raise InvalidAttributeName(f"a queue's type never changes after creation ({name!r})")
        if setting.fifo_only and not fifo:
            raise InvalidAttributeName(f"{key} applies to FIFO queues only; {name!r} is a standard queue")
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
            raise InvalidAttributeValue(f"{key} must be True or False; got {value!r}")
        return {key: value}
    assert setting.kind is int and setting.low is not None and setting.high is not None
    unit = setting.unit or ""
    return {key: validation.integer(key, value, setting.low, setting.high, unit, InvalidAttributeValue)}


def _check_combination(queue: Mapping[str, Any], name: str) -> None:
    """Rules between settings, checked on the queue as it would be."""
    if queue.get("kms_master_key_id") and queue.get("sqs_managed_sse_enabled"):
        raise InvalidAttributeValue(
            f"queue {name!r} can use one kind of server-side encryption: a KMS key or SQS-managed, not both"
        )
    if (
        queue.get("fifo_throughput_limit") == "perMessageGroupId"
        and queue.get("deduplication_scope") != "messageGroup"
    ):
        raise InvalidAttributeValue(
            "fifo_throughput_limit perMessageGroupId needs deduplication_scope messageGroup"
        )


def _redrive_columns(conn: Connection, name: str, fifo: bool, policy: object) -> dict[str, Any]:
    if policy is None:
        return {"dead_letter_queue": None, "max_receive_count": None}
    if not isinstance(policy, RedrivePolicy):
        raise InvalidAttributeValue(
            f"redrive_policy must be a durableq.RedrivePolicy or None; got {type(policy).__name__}"
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
        raise InvalidAttributeValue(f"dead_letter_queue: {exc.message}") from None
    if target_name == name:
        raise InvalidAttributeValue(f"queue {name!r} cannot be its own dead-letter queue")
    target = find(conn, target_name)
    if target is None:
        raise InvalidAttributeValue(f"dead-letter queue {target_name!r} does not exist; create it first")
    if target.fifo != fifo:
        kind = "FIFO" if fifo else "standard"
        raise InvalidAttributeValue(
            f"the dead-letter queue of a {kind} queue must be {kind} too; {target_name!r} is not"
        )
    allow = target.redrive_allow_policy
    if allow is not None and (
        allow.permission == "denyAll" or (allow.permission == "byQueue" and name not in allow.source_queues)
    ):
        raise InvalidAttributeValue(
            f"the redrive-allow policy of {target_name!r} ({allow.permission}) does not let "
            f"{name!r} use it as a dead-letter queue"
        )
    return {"dead_letter_queue": target_name, "max_receive_count": count}


def _allow_columns(policy: object) -> dict[str, Any]:
    if policy is None:
        return {"redrive_permission": None, "redrive_source_queues": None}
    if not isinstance(policy, RedriveAllowPolicy):
        raise InvalidAttributeValue(
            f"redrive_allow_policy must be a durableq.RedriveAllowPolicy or None; got {type(policy).__name__}"
        )
    permission = validation.choice(
        "redrive_allow_policy permission",
        policy.permission,
        limits.REDRIVE_PERMISSIONS,
        InvalidAttributeValue,
    )
    sources = validation.names("source_queues", policy.source_queues)
    if permission == "byQueue":
        if not 1 <= len(sources) <= limits.MAX_REDRIVE_SOURCE_QUEUES:
            raise InvalidAttributeValue(
                f"permission byQueue needs 1 to {limits.MAX_REDRIVE_SOURCE_QUEUES} source queues; "
                f"got {len(sources)}"
            )
    elif sources:
        raise InvalidAttributeValue(
            f"source_queues are only allowed with permission byQueue, not {permission}"
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
            f"policy must be a JSON document of at most {limits.MAX_POLICY_BYTES} bytes"
        )
    try:
        document = json.loads(value)
    except ValueError as exc:
        raise InvalidAttributeValue(f"policy is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InvalidAttributeValue("policy must be a JSON object")
    return value


def _kms_key(value: object) -> str | None:
    if value is None or value == "":
        return None
    value = validation.text("kms_master_key_id", value, InvalidAttributeValue)
    if len(value) > limits.MAX_KMS_KEY_ID_LENGTH:
        raise InvalidAttributeValue(
            "kms_master_key_id must be a key id, alias or ARN of at most "
            f"{limits.MAX_KMS_KEY_ID_LENGTH} characters"
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
                f"queue {name!r} exists with other attributes ({', '.join(differing)}); "
                "use set_attributes to change them or another name"
            )
        return existing, False
    columns.update(name=name, created_at=now, last_modified=now)
    names = ", ".join(columns)
    placeholders = ", ".join(f":{c}" for c in columns)
    conn.execute(f"INSERT INTO queues ({names}) VALUES ({placeholders})", columns)
    changed(conn)
    return load(conn, name), True


def update(conn: Connection, queue: QueueConfig, changes: Mapping[str, Any], now: int) -> None:
    columns = to_columns(queue.fifo, changes, conn, queue.name)
    if not columns:
        return
    _check_combination({**vars_of(queue), **columns}, queue.name)
    columns["last_modified"] = now
    assignments = ", ".join(f"{c} = :{c}" for c in columns)
    conn.execute(f"UPDATE queues SET {assignments} WHERE id = :id", {**columns, "id": queue.id})
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
