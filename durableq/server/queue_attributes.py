"""Queue attributes: SQS attribute names and text values <-> durableq settings.

SQS passes every queue attribute as a string; durableq takes typed keyword
settings.  This module only converts (names, numbers, booleans, ARNs, the
redrive JSON documents); the library checks every value and combination.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from durableq import QueueStats, RedriveAllowPolicy, RedrivePolicy, queue_settings
from durableq.errors import InvalidAttributeName, InvalidAttributeValue, Reason
from durableq.queue_settings import Kind, Setting
from durableq.types import MESSAGE_STATES

from .params import to_bool, to_int
from .urls import Endpoint

#: SQS name -> the durableq setting it is (see ``durableq/queue_settings.py``).
SETTINGS: dict[str, Setting] = {s.sqs: s for s in queue_settings.SETTINGS if s.sqs is not None}
#: durableq's one queue attribute SQS does not have (shown by ``All`` only where it is on).
LARGE_PAYLOADS = queue_settings.sqs_name("large_payloads")
#: SQS's counts of messages by state -> the ``QueueStats`` field of each.
COUNTERS = {state.sqs: state.count for state in MESSAGE_STATES}
READ_ONLY = ("QueueArn", "CreatedTimestamp", "LastModifiedTimestamp", *COUNTERS)
# `All` shows the data key reuse period only with a KMS key, as SQS does.
_WITH_KMS_KEY = queue_settings.sqs_name("kms_data_key_reuse_period")
_KMS_KEY = queue_settings.sqs_name("kms_master_key_id")
_FIFO_QUEUE = queue_settings.sqs_name("fifo")


def to_settings(attributes: Mapping[str, object], endpoint: Endpoint) -> dict[str, Any]:
    """durableq settings (``create_queue``/``set_attributes`` keywords) for SQS queue attributes."""
    settings: dict[str, Any] = {}
    for name, text in attributes.items():
        if name in READ_ONLY:
            raise InvalidAttributeName(f"attribute {name} is read-only", parameter=name, reason=Reason.FIXED)
        if name not in SETTINGS:
            raise _unknown(name)
        setting = SETTINGS[name]
        settings[setting.name] = _PARSERS[setting.kind](name, text, endpoint)
    return settings


def from_settings(
    settings: Mapping[str, Any], names: list[str], endpoint: Endpoint, stats: Callable[[], QueueStats]
) -> dict[str, str]:
    """SQS attributes (all text) of a queue, for the names asked (``All`` for every one)."""
    known = [*READ_ONLY, *SETTINGS]
    for name in names:
        if name != "All" and name not in known:
            raise _unknown(name)
    everything = "All" in names
    wanted = known if everything else names
    values: dict[str, object] = {
        "QueueArn": endpoint.arn(settings["name"]),
        "CreatedTimestamp": int(settings["created_at"].timestamp()),
        "LastModifiedTimestamp": int(settings["last_modified"].timestamp()),
    }
    if any(name in COUNTERS for name in wanted):  # counting reads an index: only when asked
        counted = stats()
        values.update({name: getattr(counted, field) for name, field in COUNTERS.items()})
    for name, setting in SETTINGS.items():
        if setting.name in settings:
            values[name] = _FORMATTERS[setting.kind](settings[setting.name], endpoint)
    if not settings["fifo"]:
        values.pop(_FIFO_QUEUE)  # SQS shows it on FIFO queues only
    if everything and values.get(_KMS_KEY) is None:
        values.pop(_WITH_KMS_KEY, None)
    if everything and not settings.get("large_payloads"):
        values.pop(LARGE_PAYLOADS, None)  # SQS's own answer to All stays exactly SQS's
    return {name: str(values[name]) for name in wanted if values.get(name) is not None}


def _unknown(name: str) -> InvalidAttributeName:
    """An attribute neither SQS nor durableq has, in SQS's words."""
    return InvalidAttributeName(f"Unknown Attribute {name}.", parameter=name, reason=Reason.UNKNOWN)


# -- text -> setting ----------------------------------------------------------


def _redrive(name: str, text: object, endpoint: Endpoint) -> RedrivePolicy | None:
    document = _json_object(name, text)
    if document is None:
        return None
    missing = {"deadLetterTargetArn", "maxReceiveCount"} - document.keys()
    if missing:
        raise InvalidAttributeValue(
            f"{name} needs deadLetterTargetArn and maxReceiveCount; missing {sorted(missing)}",
            parameter=name,
            names=sorted(missing),
            reason=Reason.MISSING,
        )
    target = endpoint.name_from_arn(
        document["deadLetterTargetArn"], "deadLetterTargetArn", InvalidAttributeValue
    )
    return RedrivePolicy(
        target, to_int("maxReceiveCount", document["maxReceiveCount"], InvalidAttributeValue)
    )


def _redrive_allow(name: str, text: object, endpoint: Endpoint) -> RedriveAllowPolicy | None:
    document = _json_object(name, text)
    if document is None:
        return None
    arns = document.get("sourceQueueArns") or []
    if not isinstance(arns, list):
        raise InvalidAttributeValue(
            f"{name} sourceQueueArns must be a list of queue ARNs",
            parameter=name,
            value=arns,
            reason=Reason.TYPE,
        )
    sources = [endpoint.name_from_arn(arn, "sourceQueueArns", InvalidAttributeValue) for arn in arns]
    return RedriveAllowPolicy(document.get("redrivePermission"), sources)  # type: ignore[arg-type]


def _json_object(name: str, text: object) -> dict[str, Any] | None:
    """A JSON policy document; empty text removes the policy."""
    if text == "":
        return None
    try:
        document = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise InvalidAttributeValue(
            f"{name} must be a JSON object: {exc}", parameter=name, value=text, reason=Reason.FORM
        ) from exc
    if not isinstance(document, dict):
        raise InvalidAttributeValue(
            f"{name} must be a JSON object; got {text!r}", parameter=name, value=text, reason=Reason.TYPE
        )
    return document


def _text(name: str, text: object, endpoint: Endpoint) -> object:
    return text  # the library checks the value


# A setting's kind -> how its attribute's text converts.
_PARSERS: dict[Kind, Callable[[str, object, Endpoint], Any]] = {
    int: lambda name, text, _: to_int(name, text, InvalidAttributeValue),
    bool: lambda name, text, _: to_bool(name, text, InvalidAttributeValue),
    str: _text,
    RedrivePolicy: _redrive,
    RedriveAllowPolicy: _redrive_allow,
}

# -- setting -> text ----------------------------------------------------------


def _format_redrive(policy: RedrivePolicy | None, endpoint: Endpoint) -> str | None:
    if policy is None:
        return None
    return _compact(
        {
            "deadLetterTargetArn": endpoint.arn(policy.dead_letter_queue),
            "maxReceiveCount": policy.max_receive_count,
        }
    )


def _format_redrive_allow(policy: RedriveAllowPolicy | None, endpoint: Endpoint) -> str | None:
    if policy is None:
        return None
    document: dict[str, object] = {"redrivePermission": policy.permission}
    if policy.source_queues:
        document["sourceQueueArns"] = [endpoint.arn(name) for name in policy.source_queues]
    return _compact(document)


def _compact(document: dict[str, object]) -> str:
    """JSON as SQS writes its policy documents: no spaces."""
    return json.dumps(document, separators=(",", ":"))


_FORMATTERS: dict[Kind, Callable[[Any, Endpoint], str | None]] = {
    int: lambda value, _: None if value is None else str(value),
    bool: lambda value, _: None if value is None else str(bool(value)).lower(),
    str: lambda value, _: value,
    RedrivePolicy: _format_redrive,
    RedriveAllowPolicy: _format_redrive_allow,
}
