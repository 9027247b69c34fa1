"""OpenTelemetry (``durableq.otel``): the spans and metrics of sends, receives and worker jobs, recorded
with the SDK's in-memory exporters, and the trace context that travels with a message, within one
process and to ``durableq worker`` in another."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id

import durableq
from durableq.handle import QueueHandle
from durableq.otel import DurableqInstrumentor
from tests.cli.test_executable import _executable
from tests.conftest import payload_dir, until
from tests.otel_support import Recorded, ids, link_of, recording, run_worker, traceparent
from tests.otel_worker import SPANS

ROOT = Path(__file__).resolve().parent.parent
XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


@pytest.fixture
def otel() -> Iterator[Recorded]:
    with recording() as recorded:
        yield recorded


def test_a_job_is_traced_from_its_send_through_its_receive_to_its_processing(
    otel: Recorded, queue: durableq.Queue
) -> None:
    sent = queue.send("resize cat.png", attributes={"size": 128})
    run_worker(queue, lambda message: None, jobs=1)

    send, receive, process = otel.one("send jobs"), otel.one("receive jobs"), otel.one("process jobs")
    assert (send.kind, receive.kind, process.kind) == (SpanKind.PRODUCER, SpanKind.CLIENT, SpanKind.CONSUMER)
    common = {
        "messaging.system": "durableq",
        "messaging.destination.name": "jobs",
        "messaging.message.id": sent.message_id,
    }
    assert dict(send.attributes or {}) == {
        **common,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
    }
    assert dict(receive.attributes or {}) == {
        **common,
        "messaging.operation.name": "receive",
        "messaging.operation.type": "receive",
        "messaging.batch.message_count": 1,
    }
    assert dict(process.attributes or {}) == {
        **common,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
    }
    # The receive and the process link to the send, the message's creation context.
    assert link_of(receive) == link_of(process) == ids(send)
    assert process.status.status_code is StatusCode.UNSET


def test_the_context_travels_as_the_traceparent_attribute(otel: Recorded, queue: durableq.Queue) -> None:
    queue.send("hello", attributes={"kind": "greeting"})
    [message] = queue.receive()
    assert message.attributes["traceparent"] == durableq.Attribute(
        "String", traceparent(otel.one("send jobs"))
    )
    assert message.attributes["kind"] == durableq.Attribute("String", "greeting")  # the caller's, kept


def test_a_handler_that_raises_makes_an_error_span_and_the_message_is_retried(
    otel: Recorded, queue: durableq.Queue
) -> None:
    def fail(message: durableq.Message) -> None:
        raise ValueError("the image is corrupt")

    queue.send("resize broken.png")
    run_worker(queue, fail, jobs=1)
    process = otel.one("process jobs")
    assert process.status.status_code is StatusCode.ERROR
    assert "ValueError: the image is corrupt" in (process.status.description or "")
    assert (process.attributes or {})["error.type"] == "ValueError"
    [event] = process.events
    assert (
        event.name == "exception" and (event.attributes or {})["exception.message"] == "the image is corrupt"
    )
    [(_, attributes, count)] = otel.points("messaging.process.duration")
    assert attributes["error.type"] == "ValueError" and count == 1
    assert queue.stats().approximate_number_of_messages_not_visible == 1  # retried after its back-off


def test_the_handlers_own_spans_are_children_of_the_process_span(
    otel: Recorded, queue: durableq.Queue
) -> None:
    tracer = otel.provider.get_tracer("the application")

    def handler(message: durableq.Message) -> None:
        with tracer.start_as_current_span("resize"):
            pass

    queue.send("resize cat.png")
    run_worker(queue, handler, jobs=1)
    resize, process = otel.one("resize"), otel.one("process jobs")
    assert resize.parent is not None and (resize.parent.trace_id, resize.parent.span_id) == ids(process)


def test_a_batch_is_one_send_span_and_each_message_carries_its_context(
    otel: Recorded, queue: durableq.Queue
) -> None:
    result = queue.send_batch(
        [
            durableq.SendEntry("a", "one"),
            durableq.SendEntry("b", "two", attributes={"n": 2}),
            durableq.SendEntry("c", "three", delay_seconds=5000),  # refused: over 900 s
        ]
    )
    assert [entry.id for entry in result.failed] == ["c"]
    send = otel.one("send jobs")
    assert (send.attributes or {})["messaging.batch.message_count"] == 3
    messages = queue.receive(10)
    assert len(messages) == 2
    assert {m.attributes["traceparent"].value for m in messages} == {traceparent(send)}
    receive = otel.one("receive jobs")
    assert (receive.attributes or {})["messaging.batch.message_count"] == 2
    assert "messaging.message.id" not in (receive.attributes or {})
    assert [link.context.span_id for link in receive.links] == [ids(send)[1]] * 2
    [(unit, _, sent)] = otel.points("messaging.client.sent.messages")
    assert (unit, sent) == ("{message}", 2)  # the messages sent, not the entries asked for


def test_a_failed_send_is_an_error_span_and_an_error_in_the_duration(
    otel: Recorded, broker: durableq.Broker
) -> None:
    gone = broker.create_queue("gone")
    broker.delete_queue("gone")
    with pytest.raises(durableq.QueueDoesNotExist):
        gone.send("lost")
    send = otel.one("send gone")
    assert send.status.status_code is StatusCode.ERROR
    assert (send.attributes or {})["error.type"] == "QueueDoesNotExist"
    assert [event.name for event in send.events] == ["exception"]
    [(unit, attributes, count)] = otel.points("messaging.client.operation.duration")
    assert unit == "s" and attributes["error.type"] == "QueueDoesNotExist" and count == 1
    assert otel.points("messaging.client.sent.messages") == []


def test_the_four_metrics_have_the_conventions_names_and_units(otel: Recorded, queue: durableq.Queue) -> None:
    for i in range(3):
        queue.send(f"job {i}")
    run_worker(queue, lambda message: None, jobs=3)
    until(lambda: len(otel.named("process jobs")) == 3, "the three jobs' spans ended")
    base = {"messaging.system": "durableq", "messaging.destination.name": "jobs"}
    durations = {
        a["messaging.operation.name"]: (unit, n)
        for unit, a, n in otel.points("messaging.client.operation.duration")
    }
    assert durations["send"] == ("s", 3)
    assert durations["receive"][0] == "s" and durations["receive"][1] >= 1
    assert otel.points("messaging.client.sent.messages") == [
        ("{message}", {**base, "messaging.operation.name": "send"}, 3)
    ]
    assert otel.points("messaging.client.consumed.messages") == [
        ("{message}", {**base, "messaging.operation.name": "receive"}, 3)
    ]
    [(unit, attributes, count)] = otel.points("messaging.process.duration")
    assert (unit, count) == ("s", 3) and "error.type" not in attributes


def test_an_empty_receive_is_measured_but_makes_no_span_unless_asked(
    otel: Recorded, queue: durableq.Queue
) -> None:
    assert queue.receive() == []
    assert otel.named("receive jobs") == []
    [(_, _, count)] = otel.points("messaging.client.operation.duration")
    assert count == 1
    DurableqInstrumentor().uninstrument()
    DurableqInstrumentor().instrument(tracer_provider=otel.provider, trace_empty_receives=True)
    assert queue.receive() == []
    assert (otel.one("receive jobs").attributes or {})["messaging.batch.message_count"] == 0


def test_receive_async_is_traced(otel: Recorded, queue: durableq.Queue) -> None:
    queue.send("hello")
    [message] = asyncio.run(queue.receive_async(wait_time=0))
    receive = otel.one("receive jobs")
    assert (receive.attributes or {})["messaging.message.id"] == message.message_id
    assert link_of(receive) == ids(otel.one("send jobs"))


def test_a_message_that_carries_a_context_keeps_it_and_the_send_continues_its_trace(
    otel: Recorded, queue: durableq.Queue
) -> None:
    theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    queue.send("relayed", attributes={"traceparent": theirs})
    send = otel.one("send jobs")
    assert format_trace_id(ids(send)[0]) == "0af7651916cd43dd8448eb211c80319c"
    assert send.parent is not None and format_span_id(send.parent.span_id) == "b7ad6b7169203331"
    [message] = queue.receive()
    assert message.attributes["traceparent"].value == theirs  # the creation context stays the producer's


def test_an_aws_trace_header_is_the_parent_of_the_send(otel: Recorded, queue: durableq.Queue) -> None:
    queue.send("from x-ray", trace_header=XRAY)
    send = otel.one("send jobs")
    assert format_trace_id(ids(send)[0]) == "5759e988bd862e3fe1be46a994272793"
    assert send.parent is not None and format_span_id(send.parent.span_id) == "53995c3f42cd8ad8"


def test_no_context_is_added_where_the_message_has_no_room_for_it(
    otel: Recorded, queue: durableq.Queue
) -> None:
    full = {f"a{i}": i for i in range(10)}  # SQS's limit: 10 attributes a message
    queue.send("full", attributes=full)
    queue.send("nine", attributes={f"a{i}": i for i in range(9)})
    by_body = {m.body: m for m in queue.receive(10)}
    assert set(by_body["full"].attributes) == set(full)
    assert set(by_body["nine"].attributes) == {*(f"a{i}" for i in range(9)), "traceparent"}
    assert len(otel.named("send jobs")) == 2  # both traced, one without a context to carry


def test_a_message_the_context_would_take_over_the_size_limit_is_sent_without_it(
    otel: Recorded, broker: durableq.Broker
) -> None:
    small = broker.create_queue("small", maximum_message_size=1024)
    full = "x" * 1024  # exactly the queue's limit: the context's bytes would take it over
    small.send(full)
    result = small.send_batch([durableq.SendEntry("full", full), durableq.SendEntry("short", "hi")])
    assert result.failed == [] and len(result.successful) == 2
    by_body = {m.body: m for m in small.receive(10)}
    assert "traceparent" not in by_body[full].attributes
    assert "traceparent" in by_body["hi"].attributes
    assert len(by_body) == 2 and small.stats().approximate_number_of_messages_not_visible == 3
    assert all(span.status.status_code is StatusCode.UNSET for span in otel.named("send small"))
    with pytest.raises(durableq.InvalidParameterValue):  # too large without the context: refused as ever
        small.send(full + "x")
    assert otel.named("send small")[-1].status.status_code is StatusCode.ERROR


def test_send_file_is_traced(otel: Recorded, queue: durableq.Queue, tmp_path: Path) -> None:
    path = tmp_path / "order.json"
    path.write_text('{"order": 7}')
    sent = queue.send_file(path)
    [message] = queue.receive()
    assert message.body == '{"order": 7}'
    send = otel.one("send jobs")
    assert (send.attributes or {})["messaging.message.id"] == sent.message_id
    assert message.attributes["traceparent"].value == traceparent(send)


def test_a_failed_receive_is_an_error_span(otel: Recorded, broker: durableq.Broker) -> None:
    gone = broker.create_queue("gone")
    broker.delete_queue("gone")
    with pytest.raises(durableq.QueueDoesNotExist):
        gone.receive()
    receive = otel.one("receive gone")
    assert receive.status.status_code is StatusCode.ERROR
    assert (receive.attributes or {})["error.type"] == "QueueDoesNotExist"


def test_a_transactional_jobs_failure_is_recorded(otel: Recorded, queue: durableq.Queue) -> None:
    def fail(message: durableq.Message, transaction: durableq.Transaction) -> None:
        raise KeyError("no such order")

    queue.send("order 7")
    called = []

    def counting(message: durableq.Message, transaction: durableq.Transaction) -> None:
        called.append(message)
        worker.stop()
        fail(message, transaction)

    worker = durableq.Worker(queue, counting, transactional=True, wait_time=1, grace_period=10)
    worker.run()
    process = otel.one("process jobs")
    assert process.status.status_code is StatusCode.ERROR
    assert (process.attributes or {})["error.type"] == "KeyError"


def test_a_virtual_queue_is_named_as_its_handle_is(otel: Recorded, queue: durableq.Queue) -> None:
    queue.virtual_queue("replies-1").send("hello")
    assert (otel.one("send jobs#replies-1").attributes or {})[
        "messaging.destination.name"
    ] == "jobs#replies-1"


def test_uninstrument_puts_the_original_functions_back(queue: durableq.Queue) -> None:
    originals = {
        name: QueueHandle.__dict__[name] for name in ("send", "send_batch", "receive", "receive_async")
    }
    handle = durableq.Worker.__dict__["_handle"]
    instrumentor = DurableqInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider())
    assert QueueHandle.__dict__["send"] is not originals["send"]
    instrumentor.uninstrument()
    assert {name: QueueHandle.__dict__[name] for name in originals} == originals
    assert durableq.Worker.__dict__["_handle"] is handle
    queue.send("plain")
    [message] = queue.receive()
    assert "traceparent" not in message.attributes


def test_durableq_alone_imports_no_opentelemetry_and_the_missing_extra_is_named() -> None:
    code = """
import sys, durableq
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
sys.modules["opentelemetry"] = None  # as if the extra were not installed
try:
    import durableq.otel
except ImportError as exc:
    print(type(exc).__name__, exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "[]",
        "OtelExtraMissing durableq.otel needs opentelemetry, which is not installed; "
        "install the OpenTelemetry extra with: pip install 'durableq[otel]'",
    ]


def test_the_bench_of_its_cost_runs() -> None:
    """``python -m bench.otel``, tiny: the three states and their ratios (never a timing assertion)."""
    command = [sys.executable, "-m", "bench.otel", "--rounds", "1", "--cycles", "5", "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {"never", "off", "on", "off/never", "on/never"}


def test_opentelemetry_instrument_finds_and_turns_on_the_instrumentor() -> None:
    [found] = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "durableq"]
    assert found.load() is DurableqInstrumentor
    auto = Path(sys.executable).parent / "opentelemetry-instrument"
    code = "from durableq.otel import DurableqInstrumentor as I; print(I().is_instrumented_by_opentelemetry)"
    done = subprocess.run(
        [str(auto), sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr


def test_a_send_here_links_to_its_processing_by_durableq_worker_in_another_process(
    otel: Recorded, target: str, db_path: Path, tmp_path: Path
) -> None:
    spans_file = tmp_path / "worker-spans.jsonl"
    with durableq.open(target, durability="normal", payload_dir=payload_dir(target, db_path)) as broker:
        jobs = broker.create_queue("jobs")
        ok = jobs.send("resize cat.png")
        failing = jobs.send("fail")
        worker = subprocess.run(
            [
                _executable(),
                "--db",
                target,
                "worker",
                "jobs",
                "tests.otel_worker:handle",
                "--idle-timeout",
                "1",
                "--wait",
                "1",
            ],
            cwd=ROOT,
            env={**os.environ, SPANS: str(spans_file)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert worker.returncode == 0, worker.stderr
    sends = {(s.attributes or {})["messaging.message.id"]: s for s in otel.named("send jobs")}
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    processed = {s["attributes"]["messaging.message.id"]: s for s in spans if s["name"] == "process jobs"}
    assert set(processed) == {ok.message_id, failing.message_id}
    for message_id, span in processed.items():
        assert span["kind"] == "SpanKind.CONSUMER"
        [link] = span["links"]
        trace_id, span_id = ids(sends[message_id])
        assert link["context"]["trace_id"] == f"0x{format_trace_id(trace_id)}"
        assert link["context"]["span_id"] == f"0x{format_span_id(span_id)}"
    assert processed[ok.message_id]["status"]["status_code"] == "UNSET"
    assert processed[failing.message_id]["status"]["status_code"] == "ERROR"
    assert processed[failing.message_id]["attributes"]["error.type"] == "RuntimeError"
