"""What the protocols share: an incoming HTTP request and an outgoing response."""

from __future__ import annotations

from dataclasses import dataclass, field
from email.message import Message
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .errors import WireError


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # as sent, percent-encoded, without the query string
    query: str
    headers: Message
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
