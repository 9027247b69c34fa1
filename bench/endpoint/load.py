"""A light SQS client for load: AWS JSON 1.0 over raw keep-alive asyncio connections.

One :class:`Connection` per simulated client.  Requests are written by hand
(no signing: the servers run without credentials; a dummy Authorization header
tells moto_server which service is meant), responses read by Content-Length.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/sqs/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64
)


class ServerError(Exception):
    """A 5xx (or an unreadable answer): counted as a failed request."""


class Connection:
    """One client's connection; reconnects when the server closes it (moto answers HTTP/1.0)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None

    async def call(self, action: str, members: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One request; the status and the decoded JSON answer."""
        if self._writer is None:
            await self.open()
        assert self._reader is not None and self._writer is not None
        body = json.dumps(members).encode()
        head = (
            f"POST / HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nX-Amz-Target: AmazonSQS.{action}\r\n"
            f"Content-Type: application/x-amz-json-1.0\r\nX-Amz-Date: 20260101T000000Z\r\n"
            f"Authorization: {AUTHORIZATION}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self._writer.write(head.encode() + body)
        try:
            status_line = await self._reader.readuntil(b"\r\n")
            headers = await self._reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.close()
            raise ServerError(f"connection closed: {exc!r}") from exc
        lowered = headers.lower()
        length = int(lowered.partition(b"content-length:")[2].partition(b"\r\n")[0] or 0)
        payload = await self._reader.readexactly(length)
        if status_line.startswith(b"HTTP/1.0") or b"connection: close" in lowered:
            self.close()
        status = int(status_line.split()[1])
        if status >= 500:
            raise ServerError(f"{status}: {payload[:200]!r}")
        return status, json.loads(payload) if payload else {}


class Timed:
    """Latencies (seconds) and failures of one phase."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failures = 0

    async def call(
        self, connection: Connection, action: str, members: dict[str, Any], timeout: float = 30
    ) -> dict[str, Any] | None:
        """One timed request; None (and a failure counted) on a 5xx, an error or no answer in time."""
        started = time.perf_counter()
        try:
            status, answer = await asyncio.wait_for(connection.call(action, members), timeout)
        except (ServerError, OSError, TimeoutError, asyncio.IncompleteReadError):
            connection.close()  # a half-read answer must not be taken for the next one
            self.failures += 1
            return None
        self.latencies.append(time.perf_counter() - started)
        if status != 200:
            self.failures += 1
            return None
        return answer
