"""A pytest plugin for running moto's SQS tests in server mode against ``durableq serve``.

Loaded by ``scripts/conformance`` (``-p moto_conformance``).  It does two things:

* It leaves out the tests of :data:`EXCLUDED`, each with its reason, of four
  kinds only: moto internals, a leniency of moto that SQS itself does not have,
  an answer of moto's that differs from SQS's, or a difference listed in the
  docs ("Where durableq differs from SQS").
* It counts the outcomes action by action (the SQS actions each test calls,
  read from its source) and writes them as a Markdown table to the file
  ``DURABLEQ_CONFORMANCE_TABLE`` names, for the docs' conformance page.
* It answers moto's ``account_id`` fixture with the account the endpoint
  serves.  moto looks the account up with STS ``GetCallerIdentity`` on the
  server under test; durableq serves SQS only, so that lookup (moto's
  plumbing, not an SQS behaviour) would fail the tests that use it.
"""

from __future__ import annotations

import inspect
import os
import re
from collections import Counter, defaultdict
from typing import Any

import pytest

#: The account ``scripts/conformance`` starts the endpoint with (moto's default account).
ACCOUNT = os.environ.get("DURABLEQ_CONFORMANCE_ACCOUNT", "123456789012")

_INTERNAL = "moto internals"
_LENIENT = "moto leniency"
_DIFFERS = "README difference"
_SHAPE = "moto's answer, not SQS's"

#: Test node id (below tests/test_sqs/) -> (kind, reason).
EXCLUDED: dict[str, tuple[str, str]] = {
    "test_sqs_multiaccount.py::TestStsAssumeRole::test_list_queues_in_different_account": (
        _INTERNAL,
        "assumes a role of a second account through STS on the same moto server",
    ),
    "test_sqs.py::test_change_message_visibility_on_old_message": (
        _DIFFERS,
        "SPEC: change-visibility with a handle older than the message's latest is MessageNotInflight",
    ),
    "test_sqs.py::test_batch_change_message_visibility_on_old_message": (
        _DIFFERS,
        "SPEC: change-visibility with a handle older than the message's latest is MessageNotInflight",
    ),
    "test_sqs.py::test_get_queue_attributes": (
        _SHAPE,
        "expects RedrivePolicy back with json.dumps's spaces; SQS answers it as compact JSON",
    ),
    "test_sqs.py::test_message_retention_period": (
        _LENIENT,
        "MessageRetentionPeriod 1 s; SQS allows 60 to 1,209,600 s",
    ),
    "test_sqs.py::test_create_queue_with_different_attributes_fail": (
        _LENIENT,
        'FifoQueue "tru"; SQS takes true or false',
    ),
    "test_sqs.py::test_message_delay_is_more_than_15_minutes": (
        _LENIENT,
        "MessageDeduplicationId on a standard queue; SQS refuses it (FIFO queues only)",
    ),
    **{
        f"test_sqs.py::{name}": (_LENIENT, 'queue attribute "VisibilityTimeout " with a trailing space')
        for name in (
            "test_message_becomes_inflight_when_received",
            "test_receive_message_with_explicit_visibility_timeout",
            "test_change_message_visibility",
            "test_queue_length",
            "test_delete_batch_operation",
            "test_delete_message_after_visibility_timeout",
        )
    },
}


def _relative(item: pytest.Item) -> str:
    return item.nodeid.split("tests/test_sqs/", 1)[-1]


#: Test node id -> the SQS actions its source calls; action -> outcome -> count.
_ACTIONS: dict[str, list[str]] = {}
_COUNTS: defaultdict[str, Counter[str]] = defaultdict(Counter)


def _sqs_actions() -> dict[str, str]:
    """boto3's method name of each SQS action -> the action (from botocore's model)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sqs")
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(): name for name in model.operation_names}


def _called(item: pytest.Item, methods: dict[str, str]) -> list[str]:
    try:
        source = inspect.getsource(item.function)  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError):
        return []
    return sorted({methods[m] for m in re.findall(r"\.([a-z_]+)\(", source) if m in methods})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, left_out = [], []
    methods = _sqs_actions()
    for item in items:
        _ACTIONS[item.nodeid] = _called(item, methods)
        (left_out if _relative(item) in EXCLUDED else kept).append(item)
    for item in left_out:
        for action in _ACTIONS[item.nodeid]:
            _COUNTS[action]["excluded"] += 1
    missing = set(EXCLUDED) - {_relative(item) for item in left_out}
    if missing:  # a renamed or deleted test: the list must say what it leaves out
        raise pytest.UsageError(f"excluded tests not found in this checkout: {sorted(missing)}")
    config.hook.pytest_deselected(items=left_out)
    items[:] = kept


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":  # a failed or skipped setup counts too
        outcome = "failed" if report.failed else report.outcome
        if report.when != "teardown" or report.failed:
            for action in _ACTIONS.get(report.nodeid, ()):
                _COUNTS[action][outcome] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.section("excluded (scripts/moto_conformance.py)")
    for name, (kind, reason) in EXCLUDED.items():
        terminalreporter.write_line(f"{name}  [{kind}] {reason}")
    target = os.environ.get("DURABLEQ_CONFORMANCE_TABLE")
    if target:
        lines = [
            "| action | tests | passed | failed | excluded | skipped by moto |",
            "|---|---|---|---|---|---|",
        ]
        for action in sorted(_COUNTS):
            n = _COUNTS[action]
            total = sum(n.values())
            lines.append(
                f"| `{action}` | {total} | {n['passed']} | {n['failed']} | {n['excluded']} | {n['skipped']} |"
            )
        with open(target, "w", encoding="utf-8") as table:
            table.write("\n".join(lines) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Any:
    if fixturedef.argname != "account_id":
        return None
    fixturedef.cached_result = (ACCOUNT, fixturedef.cache_key(request), None)
    return ACCOUNT
