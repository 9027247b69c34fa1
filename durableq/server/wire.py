"""What the protocols share: an incoming HTTP request and an outgoing response."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, overload

if TYPE_CHECKING:
    from .errors import WireError


class Headers:
    """Request headers: case-insensitive names, several values per name kept in order."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, list[str]] = {}
        for name, value in items:
            self._items.setdefault(name.lower(), []).append(value)

    @classmethod
    def from_asgi(cls, raw: Iterable[tuple[bytes, bytes]]) -> Headers:
        # HTTP header bytes are Latin-1 by definition: every byte string decodes.  One loop, no
        # generator of pairs: this runs on the event loop for every request.
        headers = cls.__new__(cls)
        items: dict[str, list[str]] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            values = items.get(key)
            if values is None:
                items[key] = [value.decode("latin-1")]
            else:
                values.append(value.decode("latin-1"))
        headers._items = items
        return headers

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of ``name``, or ``default``."""
        values = self._items.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str]:
        return list(self._items.get(name.lower(), ()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # as sent, percent-encoded, without the query string
    query: str
    headers: Headers
    body: bytes


@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class WireProtocol(Protocol):
    """What each protocol module (``protocol_json``, ``protocol_query``) provides."""

    def parse(self, request: Request) -> tuple[str, dict[str, Any]]: ...

    def result(self, action: str, members: dict[str, Any], request_id: str) -> Response: ...

    def error(self, err: WireError, request_id: str) -> Response: ...
