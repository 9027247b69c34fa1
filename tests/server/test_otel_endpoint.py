"""OpenTelemetry across the endpoint: a message sent by boto3 carries its trace context as SQS
carries it (the ``AWSTraceHeader`` system attribute that X-Ray writes, or the ``traceparent``
message attribute that OpenTelemetry's botocore instrumentation writes), and its processing by a
durableq worker on the endpoint's database links to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import format_span_id, format_trace_id

import durableq
from tests.conftest import until
from tests.otel_support import Recorded, link_of, recording, run_worker

from .conftest import ServerProcess

XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
W3C = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def otel() -> Iterator[Recorded]:
    with recording() as recorded:
        yield recorded


def test_a_boto3_send_links_to_its_processing_through_its_trace_header_or_traceparent(
    otel: Recorded, server: ServerProcess, sqs: Any, name: str, queue_url: str
) -> None:
    xray = sqs.send_message(
        QueueUrl=queue_url,
        MessageBody="from x-ray",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": XRAY}},
    )["MessageId"]
    w3c = sqs.send_message(
        QueueUrl=queue_url,
        MessageBody="from opentelemetry",
        MessageAttributes={"traceparent": {"DataType": "String", "StringValue": W3C}},
    )["MessageId"]
    with durableq.open(str(server.db), durability="normal") as broker:
        run_worker(broker.get_queue(name), lambda message: None, jobs=2)
    until(lambda: len(otel.named(f"process {name}")) == 2, "both jobs' spans ended")
    processed = {(s.attributes or {})["messaging.message.id"]: s for s in otel.named(f"process {name}")}
    linked = {
        message_id: (format_trace_id(trace_id), format_span_id(span_id))
        for message_id, (trace_id, span_id) in ((m, link_of(s)) for m, s in processed.items())
    }
    assert linked == {
        xray: ("5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8"),
        w3c: ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
    }
