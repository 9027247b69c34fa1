"""durableq as the SQS of a test suite: an in-process endpoint on a free loopback port.

    from durableq.testing import sqs_endpoint

    with sqs_endpoint() as endpoint:
        sqs = endpoint.client()                     # boto3, pointed at the endpoint
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]

The endpoint is ``durableq serve`` in a background thread of the calling process, over a new
SQLite file in a temporary folder that is removed when the block ends: every rule is the
library's, as strict as SQS (a retention of 1 s, ``FifoQueue: "tru"`` or a misspelt attribute are
refused, as SQS refuses them).  It needs the ``server`` extra; :meth:`SQSEndpoint.client` needs
boto3.  pytest users have the fixtures ``durableq_endpoint`` and ``durableq_sqs``
(:mod:`durableq.testing.pytest_plugin`, installed with durableq).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from durableq.server import DEFAULT_ACCOUNT_ID, DEFAULT_REGION, serve
from durableq.server.ephemeral import temporary_database

#: The credentials the clients of :class:`SQSEndpoint` sign with (the endpoint checks none).
ACCESS_KEY_ID = "test"
SECRET_ACCESS_KEY = "test"  # not a secret: an endpoint without credentials takes any


@dataclass(frozen=True, slots=True)
class SQSEndpoint:
    """A running endpoint: its URL, region and account, and the database file it serves."""

    url: str
    region: str
    account_id: str
    db: str

    def client(self, **options: Any) -> Any:
        """A boto3 SQS client for the endpoint (``options`` go to ``boto3.client``)."""
        try:
            import boto3
        except ImportError as exc:
            raise ImportError(
                "SQSEndpoint.client() needs boto3, which is not installed: pip install boto3", name="boto3"
            ) from exc
        return boto3.client("sqs", **{**self.client_options(), **options})

    def client_options(self) -> dict[str, str]:
        """The keyword arguments of ``boto3.client("sqs", ...)`` (and of other SDKs' constructors)."""
        return {
            "endpoint_url": self.url,
            "region_name": self.region,
            "aws_access_key_id": ACCESS_KEY_ID,
            "aws_secret_access_key": SECRET_ACCESS_KEY,
        }

    def environment(self) -> Mapping[str, str]:
        """The environment that points the AWS SDKs and the AWS CLI of a child process at the endpoint."""
        return {
            "AWS_ENDPOINT_URL_SQS": self.url,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }


@contextmanager
def sqs_endpoint(
    db: str | os.PathLike[str] | None = None,
    *,
    region: str = DEFAULT_REGION,
    account_id: str = DEFAULT_ACCOUNT_ID,
    **options: Any,
) -> Iterator[SQSEndpoint]:
    """Serve an SQS endpoint on 127.0.0.1 (a free port) until the block ends.

    Without ``db`` it serves a new temporary file, removed at the end with its messages; with
    ``db`` (a file or a PostgreSQL URL) that database, which stays.  ``options`` are those of
    :func:`durableq.server.serve` (``durability`` defaults to ``"normal"``: a test needs no
    power-loss durability).
    """
    options = {"host": "127.0.0.1", "port": 0, "durability": "normal", **options}
    if db is not None:
        with serve(db, region=region, account_id=account_id, **options) as server:
            yield SQSEndpoint(server.url, region, account_id, server.db)
        return
    with temporary_database(prefix="durableq-test-") as path:
        with serve(path, region=region, account_id=account_id, **options) as server:
            yield SQSEndpoint(server.url, region, account_id, server.db)


__all__ = ["ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SQSEndpoint", "sqs_endpoint"]
