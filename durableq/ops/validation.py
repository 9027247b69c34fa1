"""Argument checks shared by every operation; each failure says what is allowed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from .. import limits
from ..errors import (
    BatchEntryIdsNotDistinct,
    DurableQError,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    MissingParameter,
    TooManyEntriesInBatchRequest,
    UnsupportedOperation,
)

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]+")
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
        raise error(f"{name} must be an integer from {low} to {high} {unit}; got {value!r}")
    if not low <= value <= high:
        raise error(f"{name} must be from {low} to {high} {unit}; got {value}")
    return value


def moment(name: str, value: object) -> int:
    """A datetime as epoch milliseconds (a naive one is local time, as ``datetime.timestamp`` has it)."""
    if not isinstance(value, datetime):
        raise InvalidParameterValue(f"{name} must be a datetime; got {value!r}")
    try:
        return int(value.timestamp() * 1000)
    except (OverflowError, OSError, ValueError) as exc:  # a year the platform's clock cannot place
        raise InvalidParameterValue(f"{name} must be a time the clock can place; got {value!r}") from exc


def number(name: str, value: object, low: float, high: float, unit: str = "seconds") -> float:
    """``value`` as an int or float within ``[low, high]``, else InvalidParameterValue."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidParameterValue(f"{name} must be a number from {low:g} to {high:g} {unit}; got {value!r}")
    return value


def text(name: str, value: object, error: type[DurableQError] = InvalidParameterValue) -> str:
    """A str that can be stored: UTF-8 has no form for lone surrogates (``"\\ud800"``)."""
    if not isinstance(value, str):
        raise error(f"{name} must be a str; got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            f"{name} holds a lone surrogate (U+{ord(value[exc.start]):04X}), which no text can store"
        ) from None
    return value


def choice(
    name: str,
    value: object,
    allowed: Sequence[str],
    error: type[DurableQError] = InvalidParameterValue,
) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise error(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def queue_name(name: object, *, fifo: bool | None = None) -> str:
    """A valid queue name; with ``fifo`` given, also the suffix rule for that type."""
    if not isinstance(name, str) or not name:
        raise InvalidParameterValue(f"queue name must be a non-empty string; got {name!r}")
    stem = name[: -len(limits.FIFO_SUFFIX)] if name.endswith(limits.FIFO_SUFFIX) else name
    if len(name) > limits.MAX_QUEUE_NAME_LENGTH or not _QUEUE_NAME.fullmatch(stem):
        raise InvalidParameterValue(
            f"queue name {name!r} is not allowed: use 1 to {limits.MAX_QUEUE_NAME_LENGTH} "
            f"characters of A-Z a-z 0-9 _ - (FIFO names end in {limits.FIFO_SUFFIX}, counted)"
        )
    if fifo is True and stem == name:
        raise InvalidParameterValue(f"FIFO queue name {name!r} must end in {limits.FIFO_SUFFIX}")
    if fifo is False and stem != name:
        raise InvalidParameterValue(
            f"queue name {name!r} ends in {limits.FIFO_SUFFIX}, which only FIFO queues may use; "
            "pass fifo=True to create a FIFO queue"
        )
    return name


def virtual_queue_name(name: object) -> str:
    """A valid virtual queue name: the characters of a queue name, 1 to 80 of them."""
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= limits.MAX_QUEUE_NAME_LENGTH
        or not (_QUEUE_NAME.fullmatch(name))
    ):
        raise InvalidParameterValue(
            f"virtual queue name {name!r} is not allowed: use 1 to {limits.MAX_QUEUE_NAME_LENGTH} "
            "characters of A-Z a-z 0-9 _ -"
        )
    return name


def virtual_host(name: str, fifo: bool) -> None:
    """Virtual queues live on standard queues only (FIFO order is per queue and group)."""
    if fifo:
        raise UnsupportedOperation(f"virtual queues are of standard queues; {name!r} is FIFO")


def body(value: object) -> str:
    """A message body: a non-empty str of characters SQS allows."""
    if not isinstance(value, str):
        raise InvalidParameterValue(f"message body must be a str; got {type(value).__name__}")
    if not value:
        raise InvalidParameterValue("message body must not be empty (at least 1 character)")
    bad = _BAD_BODY_CHAR.search(value)
    if bad is not None:
        raise InvalidMessageContents(
            f"message body holds character U+{ord(bad.group()):04X} at position {bad.start()}; "
            "allowed are #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF"
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
    if not isinstance(value, str) or not value:
        raise MissingParameter(f"{name} is required and must be a non-empty string; got {value!r}")
    if len(value) > limits.MAX_FIFO_ID_LENGTH or not _FIFO_ID.fullmatch(value):
        raise InvalidParameterValue(
            f"{name} {value!r} is not allowed: use 1 to {limits.MAX_FIFO_ID_LENGTH} "
            "alphanumeric or ASCII punctuation characters"
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
            f"trace_header must be 1 to {limits.MAX_TRACE_HEADER_LENGTH} printable ASCII characters; "
            f"got {value!r}"
        )
    return value


def batch_ids(ids: Sequence[object]) -> list[str]:
    """Check the entry count and ids of a batch request; returns the ids."""
    if not ids:
        raise EmptyBatchRequest("a batch request needs at least one entry")
    if len(ids) > limits.MAX_BATCH_ENTRIES:
        raise TooManyEntriesInBatchRequest(
            f"a batch request holds at most {limits.MAX_BATCH_ENTRIES} entries; got {len(ids)}"
        )
    checked: list[str] = []
    for entry_id in ids:
        if (
            not isinstance(entry_id, str)
            or len(entry_id) > limits.MAX_BATCH_ENTRY_ID_LENGTH
            or not _BATCH_ENTRY_ID.fullmatch(entry_id)
        ):
            raise InvalidBatchEntryId(
                f"batch entry id {entry_id!r} is not allowed: use 1 to "
                f"{limits.MAX_BATCH_ENTRY_ID_LENGTH} characters of A-Z a-z 0-9 _ -"
            )
        checked.append(entry_id)
    if len(set(checked)) != len(checked):
        # The first entry whose id an earlier entry already used (as SQS reports it).
        duplicate = next(i for n, i in enumerate(checked) if i in checked[:n])
        raise BatchEntryIdsNotDistinct(f"batch entry id {duplicate!r} is used more than once")
    return checked


def tags(value: Mapping[str, object]) -> dict[str, str]:
    """Tag keys and values as SQS allows them."""
    if not isinstance(value, Mapping):
        raise InvalidParameterValue(f"tags must be a mapping of key to value; got {type(value).__name__}")
    checked: dict[str, str] = {}
    for key, tag_value in value.items():
        if (
            not isinstance(key, str)
            or not 1 <= len(key) <= limits.MAX_TAG_KEY_LENGTH
            or _BAD_TAG_CHAR.search(key)
        ):
            raise InvalidParameterValue(
                f"tag key {key!r} is not allowed: use 1 to {limits.MAX_TAG_KEY_LENGTH} letters, "
                "digits, spaces or _ . : / = + - @"
            )
        if (
            not isinstance(tag_value, str)
            or len(tag_value) > limits.MAX_TAG_VALUE_LENGTH
            or _BAD_TAG_CHAR.search(tag_value)
        ):
            raise InvalidParameterValue(
                f"tag {key!r} has value {tag_value!r}, which is not allowed: use 0 to "
                f"{limits.MAX_TAG_VALUE_LENGTH} letters, digits, spaces or _ . : / = + - @"
            )
        checked[key] = tag_value
    return checked


def names(label: str, values: Iterable[object]) -> list[str]:
    """A list of queue names (for example a redrive-allow policy's source queues)."""
    if isinstance(values, str):
        raise InvalidParameterValue(f"{label} must be a list of queue names, not a single string")
    return [queue_name(v) for v in values]
