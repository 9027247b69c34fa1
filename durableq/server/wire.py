"""What the protocols share: an incoming HTTP request and an outgoing response."""

from __future__ import annotations

from dataclasses import dataclass, field
from email.message import Message


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
