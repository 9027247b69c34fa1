"""pytest fixtures for a durableq SQS endpoint: ``durableq_endpoint`` and ``durableq_sqs``.

Installed with durableq (the ``pytest11`` entry point ``durableq``), so a project's tests use them
without a conftest::

    def test_a_job_is_queued(durableq_sqs):
        url = durableq_sqs.create_queue(QueueName="jobs")["QueueUrl"]
        ...

``durableq_endpoint`` is a :class:`~durableq.testing.SQSEndpoint` over a fresh temporary file:
by default one per test, so no test sees another's queues.  A suite that prefers one endpoint
for all its tests (it starts once; its tests then share queues, so they name theirs apart) says so
in its pytest configuration::

    [pytest]
    durableq_endpoint_scope = session

``durableq_sqs`` is a boto3 SQS client for it (boto3 is the project's own dependency).  The
endpoint needs durableq's ``server`` extra; nothing is imported until a test asks for a fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from durableq.testing import SQSEndpoint

#: The pytest configuration option that chooses the fixtures' scope, and what it allows.
SCOPE_OPTION = "durableq_endpoint_scope"
SCOPES = ("function", "module", "session")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        SCOPE_OPTION,
        f"How long one durableq_endpoint lives: {', '.join(SCOPES)} (default: function, one per test)",
        default="function",
    )


def _scope(fixture_name: str, config: pytest.Config) -> Any:
    scope = str(config.getini(SCOPE_OPTION)).strip()
    if scope not in SCOPES:
        raise pytest.UsageError(f"{SCOPE_OPTION} must be one of {', '.join(SCOPES)}; got {scope!r}")
    return scope


@pytest.fixture(scope=_scope)
def durableq_endpoint() -> Iterator[SQSEndpoint]:
    """An SQS endpoint on a free loopback port, over a temporary file removed afterwards."""
    from durableq.testing import sqs_endpoint

    with sqs_endpoint() as endpoint:
        yield endpoint


@pytest.fixture(scope=_scope)
def durableq_sqs(durableq_endpoint: SQSEndpoint) -> Any:
    """A boto3 SQS client of ``durableq_endpoint``."""
    return durableq_endpoint.client()
