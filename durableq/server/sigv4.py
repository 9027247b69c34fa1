"""AWS Signature Version 4: checking that a request was signed with a known secret, recently.

The credentials file holds one key pair per line, ``ACCESS_KEY_ID SECRET``
(blank lines and lines starting with ``#`` are skipped).  Only the
``Authorization`` header form is accepted, as every SDK and the AWS CLI send
it; the region and service of the signature's scope are the client's, as
signed (the server serves one region but does not refuse others for that).
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
#: A signed request older or newer than this is refused, as AWS does.
MAX_CLOCK_SKEW = 15 * 60
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
    return credentials


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
        raise WireError("IncompleteSignature", f"the credential scope {scope!r} does not match X-Amz-Date")
    if abs(now - signed_at) > MAX_CLOCK_SKEW:
        raise _refused(
            "SignatureDoesNotMatch",
            f"Signature expired: {amz_date} is more than {MAX_CLOCK_SKEW // 60} minutes "
            "from the server's time",
        )
    signed = match["signed"].split(";")
    if "host" not in signed:
        raise _refused("SignatureDoesNotMatch", "the signature must cover the Host header")
    expected = signature(secret, scope, amz_date, canonical_request(request, signed))
    if not hmac.compare_digest(expected, match["signature"]):
        raise _refused(
            "SignatureDoesNotMatch",
            "the request signature we calculated does not match the signature you provided",
        )
    return access_key


def canonical_request(request: Request, signed_headers: list[str]) -> str:
    headers = []
    for name in signed_headers:
        values = request.headers.get_all(name) or []
        headers.append(f"{name}:{','.join(' '.join(v.split()) for v in values)}\n")
    # The payload hash is always computed here: a client's X-Amz-Content-SHA256 is not trusted.
    return "\n".join(
        [
            request.method,
            _canonical_path(request.path),
            _canonical_query(request.query),
            "".join(headers),
            ";".join(signed_headers),
            hashlib.sha256(request.body).hexdigest(),
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
