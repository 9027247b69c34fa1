"""The members of one request, in the AWS JSON shape; the query protocol is converted to it.

Only wire shapes are checked here (is it there, is it a string, a whole
number, a list); every SQS rule about the values is the library's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from durableq.errors import DurableQError, InvalidParameterValue, MissingParameter, Reason

# A whole number as text: ASCII digits only ("²" is a digit to str.isdigit, not to int), one sign,
# and no more digits than any SQS number needs (int() refuses over 4,300 with a ValueError).
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,19}")
#: How much of a bad value an error message repeats.
SHOWN = 100


def shown(value: object) -> str:
    """A bad value as an error message repeats it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}… ({len(text)} characters)"


class Params:
    """Typed access to request members; query-protocol values arrive as strings and are converted."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        if not isinstance(values, Mapping):
            raise InvalidParameterValue("the request body must be a JSON object")
        self._values = values

    def __contains__(self, name: str) -> bool:
        return self._values.get(name) is not None

    def raw(self, name: str, *, required: bool = False) -> Any:
        value = self._values.get(name)
        if value is None and required:
            raise missing(name)
        return value

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self.raw(name, required=required)
        if value is not None and not isinstance(value, str):
            raise InvalidParameterValue(f"parameter {name} must be a string; got {shown(value)}")
        return value

    def required(self, name: str) -> str:
        return self.text(name, required=True)  # type: ignore[return-value]

    def integer(self, name: str, *, required: bool = False) -> int | None:
        value = self.raw(name, required=required)
        return None if value is None else to_int(name, value)

    def texts(self, name: str) -> list[str]:
        values = self._list(name)
        for value in values:
            if not isinstance(value, str):
                raise InvalidParameterValue(f"parameter {name} must be a list of strings; got {shown(value)}")
        return values

    def mapping(self, name: str) -> dict[str, Any]:
        value = self._values.get(name)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise InvalidParameterValue(f"parameter {name} must be a map; got {shown(value)}")
        return dict(value)

    def entries(self, name: str) -> list[Params]:
        return [Params(entry) for entry in self._list(name)]

    def _list(self, name: str) -> list[Any]:
        value = self._values.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidParameterValue(f"parameter {name} must be a list; got {shown(value)}")
        return value


def to_int(name: str, value: object, error: type[DurableQError] = InvalidParameterValue) -> int:
    """A whole number from JSON (an int) or the query protocol (decimal text)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
        return int(value)
    raise error(
        f"value {shown(value)} for parameter {name} is invalid: it must be a whole number",
        parameter=name,
        value=value,
        reason=Reason.TYPE,
    )


def to_bool(name: str, value: object, error: type[DurableQError] = InvalidParameterValue) -> bool:
    """A boolean from JSON or from the text ``true``/``false`` (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise error(
        f"value {shown(value)} for {name} is invalid: it must be true or false",
        parameter=name,
        value=value,
        reason=Reason.TYPE,
    )


def missing(name: str) -> MissingParameter:
    """The error of a request without its member ``name``, in SQS's words."""
    return MissingParameter(
        f"The request must contain the parameter {name}.", parameter=name, reason=Reason.MISSING
    )
