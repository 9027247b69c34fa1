"""Queue URLs and ARNs: how SQS names a queue, mapped to durableq's queue names.

A queue URL is ``http://HOST/ACCOUNT/NAME`` with HOST as the client wrote it
(its Host header), so the URLs a client gets back reach this server however
it was addressed.  A bare name, or any URL whose last path segment is the
name, is accepted wherever SQS takes a queue URL (an account id before the
name picks that account's namespace).  Names are only ever
checked and looked up by the library; nothing here builds a file path.

Every account and region is a namespace of its own, as in SQS: the account is
the one a request's queue URL names (else ``QueueOwnerAWSAccountId``, else the
server's), the region the one its SigV4 signature is scoped to (else the
server's).  The server's own account and region (``--account-id``,
``--region``) hold the library's queues under their own names; a queue of any
other namespace is the library queue ``_ns_ACCOUNT_REGION_NAME``
(:func:`namespace_prefix`), which the endpoint shows as NAME in that namespace
only.  So the names of other namespaces are 80 characters less that prefix, and
names beginning ``_ns_`` are refused in the server's own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from durableq.errors import DurableQError, InvalidParameterValue, Reason

from .errors import WireError
from .wording import Worded

_ARN_PREFIX = "arn:aws:sqs:"
#: The start of every library queue name that belongs to another account or region than the server's.
NAMESPACE_MARK = "_ns_"
_ACCOUNT = re.compile(r"[0-9]{12}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
_SCOPE = re.compile(r"Credential=[^/,\s]+/[0-9]{8}/([^/,\s]+)/")


def namespace_prefix(account_id: str, region: str) -> str:
    """What the library names of the queues of ``account_id`` in ``region`` begin with."""
    return f"{NAMESPACE_MARK}{account_id}_{region}_"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What one request needs to name queues: its namespace (region and account), the server's own,
    and the client's host.  Methods take and return library names; URLs and ARNs show wire names."""

    region: str
    account_id: str
    host: str
    scheme: str = "http"
    home: tuple[str, str] | None = None  # the server's (region, account); None: this namespace's

    @property
    def prefix(self) -> str:
        """What this namespace's library queue names begin with ("" in the server's own)."""
        if self.home is None or self.home == (self.region, self.account_id):
            return ""
        return namespace_prefix(self.account_id, self.region)

    def library_name(self, name: str) -> str:
        """The library's name of this namespace's queue ``name``."""
        if not self.prefix and name.startswith(NAMESPACE_MARK):
            raise InvalidParameterValue(
                f"queue names beginning {NAMESPACE_MARK} hold the endpoint's other accounts and regions; "
                f"got {name[:80]!r}",
                parameter="QueueName",
                value=name,
                reason=Reason.FORM,
            )
        return self.prefix + name

    def owns(self, library_name: str) -> bool:
        """Whether a library queue belongs to this namespace."""
        if self.prefix:
            return library_name.startswith(self.prefix)
        return not library_name.startswith(NAMESPACE_MARK)

    def unprefixed(self, worded: Worded) -> Worded:
        """An error's words with this namespace's library names shown as its client names them."""
        if not self.prefix:
            return worded
        strip = functools.partial(re.sub, rf"(?<![\w-]){re.escape(self.prefix)}", "")
        return Worded(worded.code, strip(worded.message), strip(worded.query_message))

    def wire_name(self, library_name: str) -> str:
        return library_name.removeprefix(self.prefix) if self.prefix else library_name

    def queue_url(self, name: str) -> str:
        return f"{self.scheme}://{self.host}/{self.account_id}/{self.wire_name(name)}"

    def arn(self, name: str) -> str:
        return f"{_ARN_PREFIX}{self.region}:{self.account_id}:{self.wire_name(name)}"

    def name_from_arn(
        self, arn: object, parameter: str, error: type[DurableQError] = InvalidParameterValue
    ) -> str:
        """The library name of the queue of an ARN of this namespace's region and account."""
        if not isinstance(arn, str) or not arn.startswith(_ARN_PREFIX) or arn.count(":") != 5:
            raise error(
                f"{parameter} must be a queue ARN, {self.arn('NAME')}; got {arn!r}",
                parameter=parameter,
                value=arn,
                reason=Reason.FORM,
            )
        region, account, name = arn[len(_ARN_PREFIX) :].split(":")
        if (region, account) != (self.region, self.account_id):
            raise error(
                f"{parameter} {arn!r} names region {region} and account {account}; the request is in "
                f"region {self.region} and account {self.account_id}",
                parameter=parameter,
                value=arn,
                reason=Reason.NOT_FOUND,
            )
        return self.library_name(name)


def namespace(
    members: Mapping[str, Any], authorization: str | None, region: str, account_id: str
) -> tuple[str, str]:
    """The (region, account) a request works in: its queue URL's account (else QueueOwnerAWSAccountId,
    else the server's ``account_id``) and its signature's region (else the server's ``region``)."""
    url, owner = members.get("QueueUrl"), members.get("QueueOwnerAWSAccountId")
    if isinstance(url, str):
        try:
            path = urlsplit(url).path if "://" in url else url
        except ValueError:  # not a URL: queue_name() says so when the action looks the queue up
            path = ""
        parts = path.strip("/").split("/")
        if len(parts) >= 2 and _ACCOUNT.fullmatch(parts[-2]):
            account_id = parts[-2]
    elif isinstance(owner, str) and _ACCOUNT.fullmatch(owner):
        account_id = owner
    scope = _SCOPE.search(authorization or "")
    if scope is not None and _REGION.fullmatch(scope[1]):
        region = scope[1]
    return region, account_id


def queue_name(url: str) -> str:
    """The queue name a queue URL (or bare name) stands for: its last path segment."""
    try:
        path = urlsplit(url).path if "://" in url else url
        return unquote(path.rstrip("/").rsplit("/", 1)[-1], errors="strict")
    except ValueError as exc:  # "http://[" (an unclosed IPv6 address), "%FF" (not UTF-8)
        raise WireError("InvalidAddress", f"the queue URL {url[:200]!r} is not a valid URL") from exc
