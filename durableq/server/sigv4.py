"""AWS Signature Version 4: checking that a request was signed with a known secret, recently.

The credentials file holds one key pair per line, ``ACCESS_KEY_ID SECRET``
(blank lines and lines starting with ``#`` are skipped).  Only the
``Authorization`` header form is accepted, as every SDK and the AWS CLI send
it.  As AWS checks it: the scope names the ``sqs`` service; the signed
headers include ``host`` and ``x-amz-date``, and ``x-amz-target`` and
``content-type`` whenever the request has them (so a captured signature of
one action cannot be replayed as another); the payload hash is the body's
(an ``X-Amz-Content-SHA256`` that says otherwise is refused); and the date is
within 15 minutes of the server's clock.  The region of the scope is the
client's, as signed (the server serves one region but does not refuse others
for that).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import posixpath
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import quote, unquote

from .errors import WireError
from .wire import Request

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
#: Headers a signature must always cover, and those it must cover whenever the request has them.
ALWAYS_SIGNED = ("host", "x-amz-date")
SIGNED_WHEN_PRESENT = ("x-amz-target", "content-type")
#: A signed request older or newer than this is refused, as AWS does.
MAX_CLOCK_SKEW = 15 * 60
#: What an access key id may be: what the ``Credential=`` of an Authorization header can name.
_KEY_ID = re.compile(r"[^,/\s]+")
_AUTHORIZATION = re.compile(
    ALGORITHM + r"\s+Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})\s*$"
)


def load_credentials(path: str | os.PathLike[str]) -> dict[str, str]:
    """Access key id -> secret, from a credentials file (see the module docstring)."""
    credentials = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 2:
                raise ValueError(f"{path}, line {number}: expected `ACCESS_KEY_ID SECRET`")
            credentials[fields[0]] = fields[1]
    if not credentials:
        raise ValueError(f"{path} holds no credentials")
    return checked_credentials(credentials)


def checked_credentials(credentials: Mapping[str, str]) -> dict[str, str]:
    """Credentials a server can check signatures with: at least one key pair, each key id one that a
    signature's ``Credential=`` can name (no spaces, commas or slashes) and each secret non-empty.

    An empty mapping is refused, not taken as "no credentials": it would let nobody in, and it is
    likely a mistake (a list left empty) by someone who meant to require signatures."""
    if not isinstance(credentials, Mapping):
        raise ValueError(f"credentials must map access key ids to secrets; got {type(credentials).__name__}")
    if not credentials:
        raise ValueError(
            "credentials holds no key pair, so no request could be signed: give at least one "
            "ACCESS_KEY_ID and its SECRET, or credentials=None to accept unsigned requests "
            "(keep the default host 127.0.0.1 then)"
        )
    for key, secret in credentials.items():
        if not isinstance(key, str) or not _KEY_ID.fullmatch(key):
            raise ValueError(
                f"credentials: access key id {key!r} cannot be named by a signature; use 1 or more "
                "characters other than spaces, commas and slashes"
            )
        if not isinstance(secret, str) or not secret:
            raise ValueError(f"credentials: the secret of access key id {key!r} must be a non-empty string")
    return dict(credentials)


def verify(request: Request, credentials: Mapping[str, str], now: float) -> str:
    """Check the request's signature and date; returns the access key id, else raises the SQS error."""
    header = request.headers.get("Authorization")
    if not header:
        raise _refused("MissingAuthenticationToken", "the request must be signed (an Authorization header)")
    match = _AUTHORIZATION.match(header)
    if match is None:
        raise WireError("IncompleteSignature", f"the Authorization header is not an {ALGORITHM} signature")
    access_key, _, scope = match["credential"].partition("/")
    secret = credentials.get(access_key)
    if secret is None:
        raise _refused("InvalidClientTokenId", "the security token included in the request is invalid")
    amz_date = request.headers.get("X-Amz-Date", "")
    signed_at = _parse_date(amz_date)
    if scope.count("/") != 3 or not scope.endswith("/aws4_request") or not amz_date.startswith(scope[:8]):
        raise WireError(
            "IncompleteSignature", f"the credential scope {scope[:200]!r} does not match X-Amz-Date"
        )
    if scope.split("/")[2] != SERVICE:
        raise _refused("SignatureDoesNotMatch", f"the credential should be scoped to the {SERVICE!r} service")
    if abs(now - signed_at) > MAX_CLOCK_SKEW:
        raise _refused(
            "SignatureDoesNotMatch",
            f"Signature expired: {amz_date} is more than {MAX_CLOCK_SKEW // 60} minutes "
            "from the server's time",
        )
    signed = match["signed"].split(";")
    for name in (*ALWAYS_SIGNED, *(n for n in SIGNED_WHEN_PRESENT if n in request.headers)):
        if name not in signed:
            raise _refused("SignatureDoesNotMatch", f"the signature must cover the {name} header")
    payload_hash = hashlib.sha256(request.body).hexdigest()
    claimed = request.headers.get("X-Amz-Content-SHA256")
    if claimed is not None and claimed != payload_hash:
        raise WireError(
            "XAmzContentSHA256Mismatch", "the X-Amz-Content-SHA256 header does not match the body's hash"
        )
    expected = signature(secret, scope, amz_date, canonical_request(request, signed, payload_hash))
    if not hmac.compare_digest(expected, match["signature"]):
        raise _refused(
            "SignatureDoesNotMatch",
            "the request signature we calculated does not match the signature you provided",
        )
    return access_key


def canonical_request(request: Request, signed_headers: list[str], payload_hash: str | None = None) -> str:
    headers = []
    for name in signed_headers:
        values = request.headers.get_all(name) or []
        headers.append(f"{name}:{','.join(' '.join(v.split()) for v in values)}\n")
    # The payload hash is always the body's: a client's X-Amz-Content-SHA256 is not trusted.
    return "\n".join(
        [
            request.method,
            _canonical_path(request.path),
            _canonical_query(request.query),
            "".join(headers),
            ";".join(signed_headers),
            payload_hash or hashlib.sha256(request.body).hexdigest(),
        ]
    )


def signature(secret: str, scope: str, amz_date: str, canonical: str) -> str:
    date, region, service, terminator = scope.split("/")
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, terminator):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _canonical_path(path: str) -> str:
    # As the SDKs do for every service but S3: dot segments removed, then encoded once more.
    normalized = posixpath.normpath(path) if path not in ("", "/") else "/"
    if path.endswith("/") and normalized != "/":
        normalized += "/"
    return quote(normalized, safe="/~")


def _canonical_query(query: str) -> str:
    pairs = []
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        pairs.append((quote(unquote(key), safe="-_.~"), quote(unquote(value), safe="-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _parse_date(amz_date: str) -> float:
    try:
        return datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise WireError(
            "IncompleteSignature", "the request needs an X-Amz-Date header (YYYYMMDDTHHMMSSZ)"
        ) from None


def _refused(code: str, message: str) -> WireError:
    return WireError(code, message, status=403)
