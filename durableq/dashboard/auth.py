"""Who may open the dashboard: the holder of its token, and only from the dashboard's own pages.

The token is printed with the address, as Jupyter does (``/?token=...``).  The first request that
carries it gets a cookie (HttpOnly, SameSite=Strict) and is sent on to the same page without the
token, so it stays out of the browser's history and of Referer headers; later requests carry the
cookie.  Scripts may send ``Authorization: Bearer TOKEN`` instead.  Without either: 401.

A request that changes something (a POST: purge, redrive, cancel) must also come from a page of the
dashboard: it carries the page's CSRF value (derived from the token, so it changes with it), and a
browser's ``Origin`` header, when present, must be the dashboard's own.  A page elsewhere can't read
the CSRF value, and SameSite=Strict keeps the cookie off requests it starts.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The session cookie's name, ``durableq_dashboard_PORT``: browsers keep cookies by host, not by
#: port, so two dashboards on one host need names of their own (or each logs the other out).
COOKIE = "durableq_dashboard_{port}"
#: On every answer: no page of another site may frame the dashboard (a framed confirmation page
#: could be clicked through: clickjacking), and a page runs only the package's own script.
SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
#: Static files need no token: they are the package's own, the same for everyone.
PUBLIC_PREFIX = "/static/"


def csrf_value(token: str) -> str:
    """The CSRF value of pages served under ``token`` (forms post it back)."""
    return hmac.new(token.encode(), b"durableq-dashboard-csrf", hashlib.sha256).hexdigest()


def same_origin(headers: Headers, scheme: str) -> bool:
    """Whether a browser's ``Origin`` (when it sent one) is the dashboard's own scheme and host."""
    origin = headers.get("origin")
    return origin is None or origin == f"{scheme}://{headers.get('host', '')}"


class TokenGate:
    """ASGI middleware: every request but static files needs the token (query, cookie or bearer)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token
        self._cookie = hmac.new(token.encode(), b"durableq-dashboard-cookie", hashlib.sha256).hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        response = None if scope["path"].startswith(PUBLIC_PREFIX) else self._check(scope)
        if response is None:
            await self._app(scope, receive, secured)
        else:
            await response(scope, receive, secured)

    def _check(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        name = COOKIE.format(port=(scope.get("server") or ("", 0))[1])
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = dict(query).get("token")
        if given is not None and _same(given, self._token):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            # "/" + the path without its leading slashes: "//evil.example/" would leave the site.
            path = "/" + scope["path"].lstrip("/")
            response = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(name, self._cookie, httponly=True, samesite="strict", path="/")
            return response
        cookie = _cookie(headers, name)
        bearer = headers.get("authorization", "")
        if (cookie is not None and _same(cookie, self._cookie)) or (
            bearer.startswith("Bearer ") and _same(bearer[7:], self._token)
        ):
            return None
        return PlainTextResponse(
            "401 Unauthorized: open the address `durableq dashboard` printed (it ends in ?token=...)",
            status_code=401,
        )


def _same(given: str, expected: str) -> bool:
    """A constant-time comparison of what a request gave (any text: headers arrive as latin-1, the
    query as UTF-8) with the token or cookie value."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def _cookie(headers: Headers, name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None
