"""AWS JSON 1.0, what current SDKs speak: ``POST /`` with ``X-Amz-Target: AmazonSQS.<Action>``."""

from __future__ import annotations

import json
from typing import Any

from .errors import WireError
from .wire import Request, Response

CONTENT_TYPE = "application/x-amz-json-1.0"
TARGET_PREFIX = "AmazonSQS."


def handles(request: Request) -> bool:
    return "X-Amz-Target" in request.headers or request.headers.get("Content-Type", "").startswith(
        CONTENT_TYPE
    )


def parse(request: Request) -> tuple[str, dict[str, Any]]:
    """The action and its members."""
    target = request.headers.get("X-Amz-Target", "")
    if not target.startswith(TARGET_PREFIX):
        raise WireError(
            "UnknownOperationException", f"X-Amz-Target must be {TARGET_PREFIX}<Action>; got {target!r}"
        )
    try:
        members = json.loads(request.body or b"{}")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        raise WireError("SerializationException", f"the request body is not JSON: {exc}") from exc
    if not isinstance(members, dict):
        raise WireError("SerializationException", "the request body must be a JSON object")
    return target[len(TARGET_PREFIX) :], members


def result(action: str, members: dict[str, Any], request_id: str) -> Response:
    return Response(200, json.dumps(members).encode(), _headers(request_id))


def error(err: WireError, request_id: str) -> Response:
    body = json.dumps({"__type": f"com.amazonaws.sqs#{err.shape}", "message": err.message}).encode()
    # The legacy code lets botocore fill Error.Code as the query protocol did.
    headers = {**_headers(request_id), "x-amzn-query-error": f"{err.code};{err.fault}"}
    return Response(err.status, body, headers)


def _headers(request_id: str) -> dict[str, str]:
    return {"Content-Type": CONTENT_TYPE, "x-amzn-RequestId": request_id}
