"""Turning shell words into library values: ``KEY=VALUE`` pairs, typed attributes,
redrive policies, queue settings, and the JSON lines of ``send --file``.

The library checks every value; parsing here only gives words their shape
(a malformed word is a usage error, exit status 2).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

import durableq
from durableq import Attribute, InvalidParameterValue, MissingParameter, RedriveAllowPolicy, RedrivePolicy

NONE_WORD = "none"

if TYPE_CHECKING:
    _ParamType = click.ParamType[Any, Any]
else:  # click's ParamType is generic only in recent releases; subscripting it would break older ones
    _ParamType = click.ParamType


class Parsed(_ParamType):
    """A click parameter type from a parse function; its ValueError becomes a usage error."""

    def __init__(self, parse: Callable[[str], Any], metavar: str) -> None:
        self._parse = parse
        self.name = metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return self.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # already converted (a default, or a second pass)
        try:
            return self._parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the value may be empty, and may hold ``=``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"{text!r} is not KEY=VALUE")
    return key, value


def typed(name: str, data_type: str, value: str) -> Attribute:
    """An attribute of an explicit type; Binary values are given in base64."""
    if data_type.split(".", 1)[0] != "Binary":
        return Attribute(data_type, value)
    try:
        return Attribute(data_type, base64.b64decode(value, validate=True))
    except binascii.Error:
        raise ValueError(f"attribute {name!r} is Binary: its value must be base64; got {value!r}") from None


def attribute(text: str) -> tuple[str, Attribute]:
    """``NAME=VALUE`` (a String) or ``NAME:TYPE=VALUE`` (Number, Binary in base64, String.label...)."""
    left, sep, value = text.partition("=")
    name, _, data_type = left.partition(":")
    if not sep or not name:
        raise ValueError(f"{text!r} is not NAME=VALUE or NAME:TYPE=VALUE (e.g. size:Number=5)")
    return name, typed(name, data_type or "String", value)


def redrive_policy(text: str) -> RedrivePolicy | None:
    """``DLQ:MAX_RECEIVES`` (e.g. ``jobs-dlq:5``), or ``none`` to remove the policy."""
    if text.lower() == NONE_WORD:
        return None
    queue, _, count = text.rpartition(":")
    if not queue or not count.isdigit():
        raise ValueError(f"{text!r} is not DLQ:MAX_RECEIVES (e.g. jobs-dlq:5) or none")
    return RedrivePolicy(queue, int(count))


def redrive_allow_policy(text: str) -> RedriveAllowPolicy | None:
    """``allowAll``, ``denyAll``, ``byQueue:Q1,Q2``, or ``none`` to remove the policy."""
    if text.lower() == NONE_WORD:
        return None
    permission, _, sources = text.partition(":")
    return RedriveAllowPolicy(permission, tuple(name for name in sources.split(",") if name))


def format_redrive_policy(policy: RedrivePolicy | None) -> str:
    """The inverse of :func:`redrive_policy`, so ``queue show`` prints what ``queue set`` takes."""
    return NONE_WORD if policy is None else f"{policy.dead_letter_queue}:{policy.max_receive_count}"


def format_redrive_allow_policy(policy: RedriveAllowPolicy | None) -> str:
    """The inverse of :func:`redrive_allow_policy`."""
    if policy is None:
        return NONE_WORD
    return policy.permission + (f":{','.join(policy.source_queues)}" if policy.source_queues else "")


def scalar(text: str) -> bool | int | str:
    """``true``/``false`` as a bool, an integer as an int, anything else as given."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        return text


_POLICIES: dict[str, Callable[[str], Any]] = {
    "redrive_policy": redrive_policy,
    "redrive_allow_policy": redrive_allow_policy,
}


def setting(text: str) -> tuple[str, Any]:
    """A queue setting ``KEY=VALUE``; dashes in the key mean underscores.

    Unknown keys pass through, so the library names them (InvalidAttributeName).
    """
    key, value = key_value(text)
    key = key.replace("-", "_")
    return key, _POLICIES[key](value) if key in _POLICIES else scalar(value)


def ranged_option(
    flag: str, text: str, low: int, high: int, default: object, metavar: str = "SECONDS"
) -> Callable[[Any], Any]:
    """An integer option whose help gives the library's range and default.

    The range is for the reader: the library checks the value (exit status 1, its message).
    """
    return click.option(flag, type=int, metavar=metavar, help=f"{text}, {low}-{high} (default {default}).")


def check_range(option: str, value: float, low: float, high: float, unit: str) -> None:
    """An option the command checks itself (the library never sees it), refused as the library would."""
    if not low <= value <= high:  # also refuses NaN
        raise InvalidParameterValue(f"{option} must be from {low:g} to {high:g} {unit}; got {value}")


#: The units of a relative time (``30m``: thirty minutes ago), in seconds.
_AGO_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def utc_time(text: str) -> datetime:
    """An ISO 8601 time (``2026-11-20``, ``2026-11-20T09:30``, ``...+02:00``; UTC without an offset),
    or how long ago: a whole number of seconds, minutes, hours or days (``90s``, ``30m``, ``2h``, ``7d``)."""
    amount, unit = text[:-1], text[-1:]
    if unit in _AGO_UNITS and amount.isascii() and amount.isdigit():
        return datetime.now(UTC) - timedelta(seconds=int(amount) * _AGO_UNITS[unit])
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO 8601 time such as 2026-11-20T09:30 nor a time ago such as 30m or 2h"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


KEY_VALUE = Parsed(key_value, "KEY=VALUE")
ATTRIBUTE = Parsed(attribute, "NAME[:TYPE]=VALUE")
SETTING = Parsed(setting, "KEY=VALUE")
REDRIVE_ALLOW = Parsed(redrive_allow_policy, "allowAll|denyAll|byQueue:Q1,Q2")
UTC_TIME = Parsed(utc_time, "TIME")


# -- send --file ----------------------------------------------------------------

#: The keys a JSON line may have, and the SendEntry field each sets.
LINE_KEYS = {
    "body": "body",
    "attributes": "attributes",
    "delay": "delay_seconds",
    "group": "group_id",
    "dedup_id": "deduplication_id",
}


def _line_attribute(name: str, value: Any) -> Any:
    """A JSON attribute: a string (String), a number (Number) or ``{"data_type": ..., "value": ...}``."""
    if isinstance(value, dict):
        if set(value) != {"data_type", "value"} or not all(isinstance(v, str) for v in value.values()):
            shape = '{"data_type": ..., "value": ...}'
            raise ValueError(f"attribute {name!r} must be a string, a number or {shape}")
        return typed(name, value["data_type"], value["value"])
    return value  # the library types (and checks) strings and numbers


def line_entry(entry_id: str, text: str, defaults: Mapping[str, Any]) -> durableq.SendEntry:
    """The message of one JSON line: a JSON string (the body) or an object with :data:`LINE_KEYS`.

    ``defaults`` (from the command's options) apply where the line says nothing;
    attributes merge, the line's winning.  Raises a DurableQError saying what is wrong.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidParameterValue(f"the line is not JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(data, str):
        data = {"body": data}
    if not isinstance(data, dict):
        raise InvalidParameterValue(
            f"a line must be a JSON string (the body) or an object with {', '.join(LINE_KEYS)}; "
            f"got a JSON {type(data).__name__}"
        )
    unknown = sorted(set(data) - set(LINE_KEYS))
    if unknown:
        raise InvalidParameterValue(f"unknown key {unknown[0]!r}; a line may have {', '.join(LINE_KEYS)}")
    if "body" not in data:
        raise MissingParameter("the line has no body")
    fields = {**defaults, **{LINE_KEYS[key]: value for key, value in data.items()}}
    line_attributes = fields.get("attributes")
    if line_attributes is not None and not isinstance(line_attributes, dict):
        raise InvalidParameterValue("attributes must be a JSON object of name to value")
    try:
        own = {name: _line_attribute(name, value) for name, value in (line_attributes or {}).items()}
    except ValueError as exc:
        raise InvalidParameterValue(str(exc)) from None
    fields["attributes"] = {**defaults.get("attributes", {}), **own} or None
    return durableq.SendEntry(entry_id, fields.pop("body"), **fields)
