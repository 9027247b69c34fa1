"""Message attributes: checking, sizing, storing and the SQS attribute digest."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from collections.abc import Mapping
from decimal import Decimal

from .. import limits
from ..errors import InvalidParameterValue, Reason
from ..types import Attribute
from ..validation import text_chars

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_TYPE = re.compile(r"(String|Number|Binary)(\.[A-Za-z0-9_.-]+)?")
_RESERVED_PREFIXES = ("aws.", "amazon.")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
# SQS numbers: up to 38 significant digits, magnitude from 10^-128 to 10^126.
_MAX_NUMBER_DIGITS = 38
_MIN_EXPONENT, _MAX_EXPONENT = -128, 126


def _check_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > limits.MAX_ATTRIBUTE_NAME_LENGTH
        or not _NAME.fullmatch(name)
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or name.lower().startswith(_RESERVED_PREFIXES)
    ):
        raise InvalidParameterValue(
            template="attribute name {value!r} is not allowed: use 1 to {high} "
            "characters of A-Z a-z 0-9 _ - ., not starting or ending with '.', without '..', "
            "and not starting with 'AWS.' or 'Amazon.'",
            parameter="attribute name",
            value=name,
            high=limits.MAX_ATTRIBUTE_NAME_LENGTH,
            reason=Reason.FORM,
        )
    return name


def _check_number(name: str, text: str) -> None:
    # SQS takes ASCII decimal numbers only; Decimal alone would also take "1_000", " 12 ",
    # other scripts' digits, "Infinity" and "NaN".
    number = Decimal(text) if _DECIMAL.fullmatch(text) else None
    if number is None:
        raise InvalidParameterValue(
            template="attribute {key!r} of type Number has value {value!r}, which is not a number",
            parameter="attribute value",
            key=name,
            value=text,
            reason=Reason.FORM,
        )
    if number:
        # Count significant digits by hand: normalize() would round to the context's precision.
        significant = "".join(map(str, number.as_tuple().digits)).strip("0")
        magnitude = number.adjusted()
        if len(significant) > _MAX_NUMBER_DIGITS or not _MIN_EXPONENT <= magnitude <= _MAX_EXPONENT:
            raise InvalidParameterValue(
                template="attribute {key!r} has Number value {value!r}: numbers allow up to "
                f"{_MAX_NUMBER_DIGITS} significant digits and magnitudes from 1e{_MIN_EXPONENT} "
                f"to 1e{_MAX_EXPONENT}",
                parameter="attribute value",
                key=name,
                value=text,
                reason=Reason.RANGE,
            )


def _to_attribute(name: str, value: object) -> Attribute:
    """The typed attribute for a plain Python value, checked."""
    if isinstance(value, Attribute):
        data_type, raw = value.data_type, value.value
    elif isinstance(value, bool):
        raise InvalidParameterValue(
            f"attribute {name!r} is a bool; use a str, int, float, bytes or durableq.Attribute"
        )
    elif isinstance(value, str):
        data_type, raw = "String", value
    elif isinstance(value, (int, float)):
        data_type, raw = "Number", repr(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data_type, raw = "Binary", bytes(value)
    else:
        raise InvalidParameterValue(
            f"attribute {name!r} has a value of type {type(value).__name__}; "
            "use a str, int, float, bytes or durableq.Attribute"
        )
    if (
        not isinstance(data_type, str)
        or len(data_type) > limits.MAX_ATTRIBUTE_TYPE_LENGTH
        or not _TYPE.fullmatch(data_type)
    ):
        raise InvalidParameterValue(
            template="attribute {key!r} has type {value!r}; allowed are String, Number and Binary, "
            "each optionally followed by '.label'",
            parameter="attribute type",
            key=name,
            value=data_type,
            reason=Reason.FORM,
        )
    base = data_type.split(".", 1)[0]
    if base == "Binary":
        if isinstance(raw, (bytearray, memoryview)):
            raw = bytes(raw)
        if not isinstance(raw, bytes):
            raise InvalidParameterValue(f"attribute {name!r} of type Binary needs a bytes value")
    elif not isinstance(raw, str):
        raise InvalidParameterValue(f"attribute {name!r} of type {base} needs a str value")
    if not raw:
        raise InvalidParameterValue(f"attribute {name!r} has an empty value; values must not be empty")
    if base == "String":
        text_chars(f"attribute {name!r}", raw)  # type: ignore[arg-type]
    elif base == "Number":
        _check_number(name, raw)  # type: ignore[arg-type]
    return Attribute(data_type, raw)


def normalize(values: Mapping[str, object] | None) -> dict[str, Attribute]:
    """Checked, typed attributes for ``send``; ``None`` means none."""
    if not values:
        return {}
    if not isinstance(values, Mapping):
        raise InvalidParameterValue(
            f"attributes must be a mapping of name to value; got {type(values).__name__}"
        )
    if len(values) > limits.MAX_MESSAGE_ATTRIBUTES:
        raise InvalidParameterValue(
            template="a message holds at most {high} attributes; got {value}",
            parameter="attributes",
            value=len(values),
            high=limits.MAX_MESSAGE_ATTRIBUTES,
            reason=Reason.TOO_MANY,
        )
    return {_check_name(name): _to_attribute(name, value) for name, value in values.items()}


def size(attributes: Mapping[str, Attribute]) -> int:
    """Bytes the attributes count toward the message size: names, types and values in UTF-8."""
    total = 0
    for name, attribute in attributes.items():
        value = attribute.value
        total += len(name.encode()) + len(attribute.data_type.encode())
        total += len(value) if isinstance(value, bytes) else len(value.encode())
    return total


def encode(attributes: Mapping[str, Attribute]) -> str | None:
    """The stored form: JSON ``{name: [type, value]}``, Binary values in base64."""
    if not attributes:
        return None
    return json.dumps(
        {
            name: [a.data_type, base64.b64encode(a.value).decode("ascii")]
            if isinstance(a.value, bytes)
            else [a.data_type, a.value]
            for name, a in attributes.items()
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode(stored: str | None) -> dict[str, Attribute]:
    """The attributes of a stored message."""
    if not stored:
        return {}
    return {
        name: Attribute(data_type, base64.b64decode(value) if data_type.startswith("Binary") else value)
        for name, (data_type, value) in json.loads(stored).items()
    }


def md5_of_attributes(attributes: Mapping[str, Attribute]) -> str | None:
    """SQS's MD5OfMessageAttributes: sorted names, length-prefixed name, type, transport byte, value."""
    if not attributes:
        return None
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attributes):
        attribute = attributes[name]
        value = attribute.value
        for part in (name.encode(), attribute.data_type.encode()):
            digest.update(struct.pack(">I", len(part)) + part)
        if isinstance(value, bytes):
            digest.update(b"\x02" + struct.pack(">I", len(value)) + value)
        else:
            encoded = value.encode()
            digest.update(b"\x01" + struct.pack(">I", len(encoded)) + encoded)
    return digest.hexdigest()
