"""Queue URLs and ARNs: how SQS names a queue, mapped to durableq's queue names.

A queue URL is ``http://HOST/ACCOUNT/NAME`` with HOST as the client wrote it
(its Host header), so the URLs a client gets back reach this server however
it was addressed.  A bare name, or any URL whose last path segment is the
name, is accepted wherever SQS takes a queue URL.  Names are only ever
checked and looked up by the library; nothing here builds a file path.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from durableq.errors import DurableQError, InvalidParameterValue, Reason

from .errors import WireError

_ARN_PREFIX = "arn:aws:sqs:"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What one request needs to name queues: the server's region and account, and the client's host."""

    region: str
    account_id: str
    host: str
    scheme: str = "http"

    def queue_url(self, name: str) -> str:
        return f"{self.scheme}://{self.host}/{self.account_id}/{name}"

    def arn(self, name: str) -> str:
        return f"{_ARN_PREFIX}{self.region}:{self.account_id}:{name}"

    def name_from_arn(
        self, arn: object, parameter: str, error: type[DurableQError] = InvalidParameterValue
    ) -> str:
        """The queue name of an ARN of this server's region and account."""
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
                f"{parameter} {arn!r} names region {region} and account {account}; this endpoint serves "
                f"region {self.region} and account {self.account_id}",
                parameter=parameter,
                value=arn,
                reason=Reason.NOT_FOUND,
            )
        return name


def queue_name(url: str) -> str:
    """The queue name a queue URL (or bare name) stands for: its last path segment."""
    try:
        path = urlsplit(url).path if "://" in url else url
        return unquote(path.rstrip("/").rsplit("/", 1)[-1], errors="strict")
    except ValueError as exc:  # "http://[" (an unclosed IPv6 address), "%FF" (not UTF-8)
        raise WireError("InvalidAddress", f"the queue URL {url[:200]!r} is not a valid URL") from exc
