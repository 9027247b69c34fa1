"""Hypothesis fuzzes both protocols against a real server: no request, however malformed, gets a 5xx.

Every answer must also be a well-formed SQS answer in the request's protocol
(JSON with ``__type`` for errors; XML for the query protocol), so clients can
always read what went wrong.
"""

from __future__ import annotations

import copy
import http.client
import json
from typing import Any
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durableq.server.actions import ACTIONS

from .conftest import ServerProcess, client

PARAMETERS = [
    "QueueUrl", "QueueName", "MessageBody", "DelaySeconds", "MessageAttributes", "MessageSystemAttributes",
    "MessageGroupId", "MessageDeduplicationId", "Entries", "ReceiptHandle", "VisibilityTimeout",
    "MaxNumberOfMessages", "WaitTimeSeconds", "AttributeNames", "MessageAttributeNames",
    "MessageSystemAttributeNames", "ReceiveRequestAttemptId", "Attributes", "tags", "Tags", "TagKeys",
    "QueueNamePrefix", "MaxResults", "NextToken", "Label", "AWSAccountIds", "Actions", "SourceArn",
    "DestinationArn", "MaxNumberOfMessagesPerSecond", "TaskHandle",
]  # fmt: skip
INNER = [
    "Id", "MessageBody", "DataType", "StringValue", "BinaryValue", "ReceiptHandle", "VisibilityTimeout",
    "DelaySeconds", "MessageGroupId", "MessageDeduplicationId", "AWSTraceHeader", "MessageAttributes",
    "MessageSystemAttributes", "Name", "Value", "Key", "RedrivePolicy", "FifoQueue", "Policy",
]  # fmt: skip
NASTY = [
    "", "+-1", "²", "9" * 5_000, "-1", "1e3", "http://[", "fuzz", "fuzz.fifo", "All", ".*", "String",
    "Binary", "Number", "true", "\x00", "\ud800"[:0] + "\uffff", "arn:aws:sqs:us-east-1:000000000000:fuzz",
    '{"deadLetterTargetArn": 5}', "1.1.x.y", "a" * 300,
]  # fmt: skip
ACTION_NAMES = [*ACTIONS, "Nope", ""]
ARN = "arn:aws:sqs:us-east-1:000000000000:"

leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(NASTY)
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(INNER) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
ATTRIBUTE = {"DataType": "String", "StringValue": "v"}
# A valid request of every action; the fuzzer breaks one to three of its values (or adds strangers).
TEMPLATES: dict[str, dict[str, Any]] = {
    "SendMessage": {
        "QueueUrl": "fuzz", "MessageBody": "x", "DelaySeconds": 0, "MessageAttributes": {"a": ATTRIBUTE},
        "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1"}},
    },
    "SendMessageBatch": {
        "QueueUrl": "fuzz",
        "Entries": [
            {"Id": "a", "MessageBody": "x", "DelaySeconds": 0, "MessageAttributes": {"a": ATTRIBUTE}}
        ],
    },
    "ReceiveMessage": {
        "QueueUrl": "fuzz", "MaxNumberOfMessages": 1, "VisibilityTimeout": 0, "WaitTimeSeconds": 0,
        "AttributeNames": ["All"], "MessageAttributeNames": ["All"], "ReceiveRequestAttemptId": "r",
    },
    "DeleteMessage": {"QueueUrl": "fuzz", "ReceiptHandle": "1.1.0000000000000000.0000000000000000"},
    "DeleteMessageBatch": {"QueueUrl": "fuzz", "Entries": [{"Id": "a", "ReceiptHandle": "x"}]},
    "ChangeMessageVisibility": {"QueueUrl": "fuzz", "ReceiptHandle": "x", "VisibilityTimeout": 0},
    "ChangeMessageVisibilityBatch": {
        "QueueUrl": "fuzz", "Entries": [{"Id": "a", "ReceiptHandle": "x", "VisibilityTimeout": 0}],
    },
    "CreateQueue": {"QueueName": "fuzz-new", "Attributes": {"VisibilityTimeout": "30"}, "tags": {"k": "v"}},
    "GetQueueUrl": {"QueueName": "fuzz"},
    "ListQueues": {"QueueNamePrefix": "f", "MaxResults": 1, "NextToken": "ZnV6eg=="},
    "DeleteQueue": {"QueueUrl": "fuzz-new"},
    "GetQueueAttributes": {"QueueUrl": "fuzz", "AttributeNames": ["All"]},
    "SetQueueAttributes": {"QueueUrl": "fuzz", "Attributes": {"VisibilityTimeout": "30"}},
    "PurgeQueue": {"QueueUrl": "fuzz"},
    "ListDeadLetterSourceQueues": {"QueueUrl": "fuzz", "MaxResults": 1},
    "TagQueue": {"QueueUrl": "fuzz", "Tags": {"k": "v"}},
    "UntagQueue": {"QueueUrl": "fuzz", "TagKeys": ["k"]},
    "ListQueueTags": {"QueueUrl": "fuzz"},
    "AddPermission": {
        "QueueUrl": "fuzz", "Label": "l", "AWSAccountIds": ["123456789012"], "Actions": ["SendMessage"],
    },
    "RemovePermission": {"QueueUrl": "fuzz", "Label": "l"},
    "StartMessageMoveTask": {"SourceArn": f"{ARN}fuzz", "MaxNumberOfMessagesPerSecond": 1},
    "ListMessageMoveTasks": {"SourceArn": f"{ARN}fuzz", "MaxResults": 1},
    "CancelMessageMoveTask": {"TaskHandle": "x"},
}  # fmt: skip


def _slots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of a request, nested ones too."""
    found: list[tuple[Any, Any]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, value in items:
        found.append((node, key))
        found.extend(_slots(value))
    return found


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    action = draw(st.sampled_from(sorted(TEMPLATES)))
    body = copy.deepcopy(TEMPLATES[action])
    for _ in range(draw(st.integers(1, 3))):
        container, key = draw(st.sampled_from(_slots(body) or [(body, "QueueUrl")]))
        if isinstance(container, dict) and draw(st.booleans()):
            container[draw(st.sampled_from(PARAMETERS + INNER) | st.text(max_size=6))] = draw(values)
        else:
            container[key] = draw(values)
    return action, body


def flatten(members: dict[str, Any]) -> list[tuple[str, str]]:
    """The query-protocol form of request members (lists numbered, maps as Name/Value pairs)."""
    names = {"Attributes": "Attribute", "MessageAttributes": "MessageAttribute", "Tags": "Tag", "tags": "Tag"}
    pairs: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any, parent: str) -> None:
        if isinstance(value, list):
            for i, item in enumerate(value, 1):
                walk(f"{prefix}.{i}", item, parent)
        elif isinstance(value, dict) and parent in names:
            key = "Key" if parent in ("Tags", "tags") else "Name"
            for i, (name, item) in enumerate(value.items(), 1):
                pairs.append((f"{prefix}.{i}.{key}", str(name)))
                walk(f"{prefix}.{i}.Value", item, "")
        elif isinstance(value, dict):
            for name, item in value.items():
                walk(f"{prefix}.{name}" if prefix else str(name), item, str(name))
        else:
            pairs.append((prefix, json.dumps(value) if not isinstance(value, str) else value))

    for name, value in members.items():
        walk(names.get(name, name), value, name)
    return pairs


query_names = st.sampled_from(["Action", "Version", "1", ".", "a..b", "Attribute.x.Name"]) | st.text(
    max_size=10
)
query_values = st.sampled_from(NASTY) | st.text(max_size=12) | st.sampled_from(ACTION_NAMES)
raw_bytes = st.binary(max_size=64)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def fuzzed(server: ServerProcess) -> str:
    sqs = client(server.url)
    sqs.create_queue(QueueName="fuzz")
    sqs.create_queue(QueueName="fuzz.fifo", Attributes={"FifoQueue": "true"})
    sqs.send_message_batch(QueueUrl="fuzz", Entries=[{"Id": str(i), "MessageBody": "m"} for i in range(10)])
    return server.url


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(request=requests(), raw=st.none() | raw_bytes, action=st.none() | st.sampled_from(ACTION_NAMES))
def test_json_protocol(
    fuzzed: str, request: tuple[str, dict[str, Any]], raw: bytes | None, action: str | None
) -> None:
    action = action or request[0]  # now and then a request under another action's name
    payload = raw if raw is not None else json.dumps(request[1]).encode()
    status, headers, answer = post(
        fuzzed, payload, {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"}
    )
    assert status < 500, answer
    decoded = json.loads(answer)
    if status != 200:
        assert decoded["__type"].startswith("com.amazonaws.sqs#") and decoded["message"]
        assert headers["x-amzn-query-error"]


@FUZZ
@given(
    request=requests(),
    pairs=st.lists(st.tuples(query_names, query_values), max_size=3),
    raw=st.none() | raw_bytes,
)
def test_query_protocol(
    fuzzed: str, request: tuple[str, dict[str, Any]], pairs: list[tuple[str, str]], raw: bytes | None
) -> None:
    action, members = request
    form = "&".join(
        f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in [("Action", action), *flatten(members), *pairs]
    )
    body = form.encode() if raw is None else form.encode() + b"&" + raw
    status, _, answer = post(fuzzed, body, {"Content-Type": "application/x-www-form-urlencoded"})
    assert status < 500, answer
    root = ElementTree.fromstring(answer)
    if status != 200:
        assert root.tag.endswith("ErrorResponse")
