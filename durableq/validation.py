"""Argument checks shared by every operation; each failure says what is allowed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from . import limits
from .errors import (
    BatchEntryIdsNotDistinct,
    DurableQError,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    MissingParameter,
    Reason,
    TooManyEntriesInBatchRequest,
    UnsupportedOperation,
)

#: The ``parameter`` of errors about a queue name, a message body, the entries of a batch.
QUEUE_NAME = "queue name"
BODY = "body"
ENTRIES = "entries"

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]+")
_SCHEMA_NAME = re.compile(r"(?!pg_)[a-z_][a-z0-9_]*")
# PostgreSQL's words that cannot name a schema unquoted (reserved, and type or function names such as
# ``left``: pg_get_keywords() catcode R and T, to PostgreSQL 18).
_SCHEMA_KEYWORDS = frozenset(
    """all analyse analyze and any array as asc asymmetric authorization binary both case cast check
    collate collation column concurrently constraint create cross current_catalog current_date
    current_role current_schema current_time current_timestamp current_user default deferrable desc
    distinct do else end except false fetch for foreign freeze from full grant group having ilike in
    initially inner intersect into is isnull join lateral leading left like limit localtime
    localtimestamp natural not notnull null offset on only or order outer overlaps placing primary
    references returning right select session_user similar some symmetric system_user table
    tablesample then to trailing true union unique user using variadic verbose when where window
    with""".split()
)
_BATCH_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]+")
# Alphanumerics and ASCII punctuation, as SQS allows for FIFO ids.
_FIFO_ID = re.compile(r"[!-~]+")
# The complement of the characters SQS allows in a message body.
_BAD_BODY_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# SQS allows letters, digits, white space and _ . : / = + - @ in tag keys and values.
_BAD_TAG_CHAR = re.compile(r"[^\w\s.:/=+\-@]")


def integer(
    name: str,
    value: object,
    low: int,
    high: int,
    unit: str = "seconds",
    error: type[DurableQError] = InvalidParameterValue,
) -> int:
    """``value`` as an int within ``[low, high]``, else ``error`` (InvalidParameterValue)."""
    if isinstance(value, bool) or not isinstance(value, int):
        template = "{parameter} must be an integer from {low} to {high} {unit}; got {value!r}"
    elif not low <= value <= high:
        template = "{parameter} must be from {low} to {high} {unit}; got {value}"
    else:
        return value
    raise error(
        template=template, parameter=name, value=value, low=low, high=high, unit=unit, reason=Reason.RANGE
    )


def moment(name: str, value: object) -> int:
    """A datetime as epoch milliseconds (a naive one is local time, as ``datetime.timestamp`` has it)."""
    if not isinstance(value, datetime):
        raise InvalidParameterValue(
            template="{parameter} must be a datetime; got {value!r}",
            parameter=name,
            value=value,
            reason=Reason.TYPE,
        )
    try:
        return int(value.timestamp() * 1000)
    except (OverflowError, OSError, ValueError) as exc:  # a year the platform's clock cannot place
        raise InvalidParameterValue(
            template="{parameter} must be a time the clock can place; got {value!r}",
            parameter=name,
            value=value,
            reason=Reason.RANGE,
        ) from exc


def number(name: str, value: object, low: float, high: float, unit: str = "seconds") -> float:
    """``value`` as an int or float within ``[low, high]``, else InvalidParameterValue."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidParameterValue(
            template="{parameter} must be a number from {low:g} to {high:g} {unit}; got {value!r}",
            parameter=name,
            value=value,
            low=low,
            high=high,
            unit=unit,
            reason=Reason.RANGE,
        )
    return value


def text(name: str, value: object, error: type[DurableQError] = InvalidParameterValue) -> str:
    """A str that can be stored: UTF-8 has no form for lone surrogates (``"\\ud800"``)."""
    if not isinstance(value, str):
        raise error(
            template=f"{{parameter}} must be a str; got {type(value).__name__}",
            parameter=name,
            value=value,
            reason=Reason.TYPE,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            template=f"{{parameter}} holds a lone surrogate (U+{ord(value[exc.start]):04X}), "
            "which no text can store",
            parameter=name,
            value=value,
            reason=Reason.FORM,
        ) from None
    return value


def choice(
    name: str,
    value: object,
    allowed: Sequence[str],
    error: type[DurableQError] = InvalidParameterValue,
) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise error(
            template="{parameter} must be one of {choices}; got {value!r}",
            parameter=name,
            value=value,
            choices=allowed,
            reason=Reason.CHOICE,
        )
    return value


def queue_name(name: object, *, fifo: bool | None = None) -> str:
    """A valid queue name; with ``fifo`` given, also the suffix rule for that type."""
    stem = name.removesuffix(limits.FIFO_SUFFIX) if isinstance(name, str) else ""
    if not isinstance(name, str) or not name:
        template, reason = "queue name must be a non-empty string; got {value!r}", Reason.TYPE
    elif len(name) > limits.MAX_QUEUE_NAME_LENGTH or not _QUEUE_NAME.fullmatch(stem):
        template = "queue name {value!r} is not allowed: use 1 to {high} characters of A-Z a-z 0-9 _ - "
        template += f"(FIFO names end in {limits.FIFO_SUFFIX}, counted)"
        reason = Reason.FORM
    elif fifo is True and stem == name:
        template, reason = f"FIFO queue name {{value!r}} must end in {limits.FIFO_SUFFIX}", Reason.FIFO_NAME
    elif fifo is False and stem != name:
        template = f"queue name {{value!r}} ends in {limits.FIFO_SUFFIX}, which only FIFO queues may use; "
        template += "pass {fifo=True} to create a FIFO queue"
        reason = Reason.FORM
    else:
        return name
    raise InvalidParameterValue(
        template=template, parameter=QUEUE_NAME, value=name, high=limits.MAX_QUEUE_NAME_LENGTH, reason=reason
    )


def schema_name(value: object) -> str:
    """A PostgreSQL schema name durableq may use (written as it is in SQL: no quoting needed)."""
    if (
        isinstance(value, str)
        and len(value) <= limits.MAX_SCHEMA_NAME_LENGTH
        and _SCHEMA_NAME.fullmatch(value)
    ):
        if value != "information_schema" and value not in _SCHEMA_KEYWORDS:
            return value
    raise InvalidParameterValue(
        template="schema must be 1 to {high} characters of a-z 0-9 _, not starting with a digit nor "
        "pg_ (nor information_schema, nor a word SQL reserves, such as user or left); got {value!r}",
        parameter="schema",
        value=value,
        high=limits.MAX_SCHEMA_NAME_LENGTH,
        reason=Reason.FORM,
    )


def virtual_queue_name(name: object) -> str:
    """A valid virtual queue name: the characters of a queue name, 1 to 80 of them."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= limits.MAX_QUEUE_NAME_LENGTH
        or not (_QUEUE_NAME.fullmatch(name))
    ):
        raise InvalidParameterValue(
            template="virtual queue name {value!r} is not allowed: use 1 to {high} "
            "characters of A-Z a-z 0-9 _ -",
            parameter="virtual queue name",
            value=name,
            high=limits.MAX_QUEUE_NAME_LENGTH,
            reason=Reason.FORM,
        )
    return name


def virtual_host(name: str, fifo: bool) -> None:
    """Virtual queues live on standard queues only (FIFO order is per queue and group)."""
    if fifo:
        raise UnsupportedOperation(f"virtual queues are of standard queues; {name!r} is FIFO")


def body(value: object) -> str:
    """A message body: a non-empty str of characters SQS allows."""
    if not isinstance(value, str):
        raise InvalidParameterValue(
            f"message body must be a str; got {type(value).__name__}", parameter=BODY, reason=Reason.TYPE
        )
    if not value:
        raise InvalidParameterValue(
            "message body must not be empty (at least 1 character)", parameter=BODY, reason=Reason.MISSING
        )
    bad = _BAD_BODY_CHAR.search(value)
    if bad is not None:
        raise InvalidMessageContents(
            f"message body holds character U+{ord(bad.group()):04X} at position {bad.start()}; "
            "allowed are #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF",
            parameter=BODY,
            value=bad.group(),
            reason=Reason.FORM,
        )
    return value


def text_chars(name: str, value: str) -> None:
    """Reject characters a message body could not hold (used for String attribute values)."""
    bad = _BAD_BODY_CHAR.search(value)
    if bad is not None:
        raise InvalidParameterValue(
            f"{name} holds character U+{ord(bad.group()):04X} at position {bad.start()}, "
            "which SQS does not allow in message text"
        )


def fifo_id(name: str, value: object) -> str:
    """A group, deduplication or receive attempt id: 1-128 ASCII alphanumerics or punctuation."""
    if not isinstance(value, str):
        raise InvalidParameterValue(
            template="{parameter} must be a string; got {value!r}",
            parameter=name,
            value=value,
            reason=Reason.FORM,
        )
    if not value:
        raise MissingParameter(
            template="{parameter} is required and must be a non-empty string; got {value!r}",
            parameter=name,
            value=value,
            reason=Reason.MISSING,
        )
    if len(value) > limits.MAX_FIFO_ID_LENGTH or not _FIFO_ID.fullmatch(value):
        raise InvalidParameterValue(
            template="{parameter} {value!r} is not allowed: use 1 to {high} "
            "alphanumeric or ASCII punctuation characters",
            parameter=name,
            value=value,
            high=limits.MAX_FIFO_ID_LENGTH,
            reason=Reason.FORM,
        )
    return value


def trace_header(value: object) -> str:
    """An AWSTraceHeader: printable ASCII, as X-Ray writes it."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= limits.MAX_TRACE_HEADER_LENGTH
        or not value.isprintable()
        or not value.isascii()
    ):
        raise InvalidParameterValue(
            template="{parameter} must be 1 to {high} printable ASCII characters; got {value!r}",
            parameter="trace_header",
            value=value,
            high=limits.MAX_TRACE_HEADER_LENGTH,
            reason=Reason.FORM,
        )
    return value


def batch_ids(ids: Sequence[object]) -> list[str]:
    """Check the entry count and ids of a batch request; returns the ids."""
    if not ids:
        raise EmptyBatchRequest(
            "a batch request needs at least one entry", parameter=ENTRIES, reason=Reason.MISSING
        )
    if len(ids) > limits.MAX_BATCH_ENTRIES:
        raise TooManyEntriesInBatchRequest(
            template="a batch request holds at most {high} entries; got {value}",
            parameter=ENTRIES,
            value=len(ids),
            high=limits.MAX_BATCH_ENTRIES,
            reason=Reason.TOO_MANY,
        )
    checked: list[str] = []
    for entry_id in ids:
        if (
            not isinstance(entry_id, str)
            or len(entry_id) > limits.MAX_BATCH_ENTRY_ID_LENGTH
            or not _BATCH_ENTRY_ID.fullmatch(entry_id)
        ):
            raise InvalidBatchEntryId(
                template="batch entry id {value!r} is not allowed: use 1 to {high} "
                "characters of A-Z a-z 0-9 _ -",
                parameter=ENTRIES,
                value=entry_id,
                entry_id=entry_id if isinstance(entry_id, str) else None,
                high=limits.MAX_BATCH_ENTRY_ID_LENGTH,
                reason=Reason.FORM,
            )
        checked.append(entry_id)
    if len(set(checked)) != len(checked):
        # The first entry whose id an earlier entry already used (as SQS reports it).
        duplicate = next(i for n, i in enumerate(checked) if i in checked[:n])
        raise BatchEntryIdsNotDistinct(
            template="batch entry id {entry_id!r} is used more than once",
            parameter=ENTRIES,
            entry_id=duplicate,
            reason=Reason.EXISTS,
        )
    return checked


def tags(value: Mapping[str, object]) -> dict[str, str]:
    """Tag keys and values as SQS allows them."""
    if not isinstance(value, Mapping):
        raise InvalidParameterValue(
            f"tags must be a mapping of key to value; got {type(value).__name__}",
            parameter="tags",
            reason=Reason.TYPE,
        )
    checked: dict[str, str] = {}
    for key, tag_value in value.items():
        if (
            not isinstance(key, str)
            or not 1 <= len(key) <= limits.MAX_TAG_KEY_LENGTH
            or _BAD_TAG_CHAR.search(key)
        ):
            raise InvalidParameterValue(
                template="tag key {value!r} is not allowed: use 1 to {high} "
                "letters, digits, spaces or _ . : / = + - @",
                parameter="tags",
                key=key if isinstance(key, str) else None,
                value=key,
                high=limits.MAX_TAG_KEY_LENGTH,
                reason=Reason.FORM,
            )
        if (
            not isinstance(tag_value, str)
            or len(tag_value) > limits.MAX_TAG_VALUE_LENGTH
            or _BAD_TAG_CHAR.search(tag_value)
        ):
            raise InvalidParameterValue(
                template="tag {key!r} has value {value!r}, which is not allowed: use 0 to {high} "
                "letters, digits, spaces or _ . : / = + - @",
                parameter="tags",
                key=key,
                value=tag_value,
                high=limits.MAX_TAG_VALUE_LENGTH,
                reason=Reason.FORM,
            )
        checked[key] = tag_value
    return checked


def names(label: str, values: Iterable[object]) -> list[str]:
    """A list of queue names (for example a redrive-allow policy's source queues)."""
    if isinstance(values, str):
        raise InvalidParameterValue(
            template="{parameter} must be a list of queue names, not a single string",
            parameter=label,
            value=values,
            reason=Reason.TYPE,
        )
    return [queue_name(v) for v in values]
