"""send (one message), receive, delete, change-visibility and peek."""

from __future__ import annotations

import hashlib
import json

import durableq
from durableq import Attribute

from .conftest import Run


def test_send_one_message_with_typed_attributes(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    result = run(
        "send", "jobs", "resize cat.png",
        "--attr", "who=ann", "--attr", "size:Number=512", "--attr", "blob:Binary=aGk=",
        "--attr", "price:Number.euro=9.5", "--attr", "eq=a=b", "--json",
    )  # fmt: skip
    sent = json.loads(result.stdout)
    (message,) = jobs.peek()
    assert message.message_id == sent["message_id"] and message.body == "resize cat.png"
    assert message.attributes == {
        "who": Attribute("String", "ann"),
        "size": Attribute("Number", "512"),
        "blob": Attribute("Binary", b"hi"),
        "price": Attribute("Number.euro", "9.5"),
        "eq": Attribute("String", "a=b"),
    }
    assert sent["md5_of_body"] == hashlib.md5(b"resize cat.png").hexdigest()


def test_send_reads_the_body_from_stdin(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    result = run("send", "jobs", "-", "--delay", "0", input='{"id": 7}\n')
    assert result.stdout.startswith("sent message ")
    assert [m.body for m in jobs.peek()] == ['{"id": 7}\n']


def test_send_to_a_fifo_queue(run: Run, broker: durableq.Broker) -> None:
    orders = broker.create_queue("orders.fifo", fifo=True)
    args = ("send", "orders.fifo", "created", "--group", "o17", "--dedup-id", "c17", "--json")
    first = json.loads(run(*args).stdout)
    again = json.loads(run(*args).stdout)
    assert first["sequence_number"] is not None
    assert again["message_id"] == first["message_id"]  # deduplicated
    (message,) = orders.peek()
    assert (message.group_id, message.deduplication_id) == ("o17", "c17")
    missing = run("send", "orders.fifo", "x", code=1)
    assert missing.stderr.startswith("error: MissingParameter: --group is required")


def test_send_checks_its_words(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    assert "give a BODY" in run("send", "jobs", code=2).stderr
    run("send", "jobs", "--attr", "novalue", "x", code=2)
    run("send", "jobs", "x", "--attr", "b:Binary=not base64!", code=2)
    bad_type = run("send", "jobs", "x", "--attr", "n:Float=1", code=1)
    assert bad_type.stderr.startswith("error: InvalidParameterValue: attribute 'n' has type 'Float'")
    bad_number = run("send", "jobs", "x", "--attr", "n:Number=many", code=1)
    assert "which is not a number" in bad_number.stderr
    assert broker.get_queue("jobs").peek() == []


def test_receive_prints_body_id_receipt_and_count(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    sent = jobs.send("hello", attributes={"n": 5}).message_id
    text = run("receive", "jobs", "--visibility-timeout", "0").stdout
    assert sent in text and "hello" in text and "receive count:  1" in text and "n:Number=5" in text
    (received,) = json.loads(run("receive", "jobs", "--visibility-timeout", "0", "--json").stdout)
    assert received["message_id"] == sent and received["body"] == "hello"
    assert received["receive_count"] == 2 and received["receipt_handle"]
    assert received["attributes"] == {"n": {"data_type": "Number", "value": "5"}}
    # visibility 0: still there and visible to anyone
    assert jobs.stats().approximate_number_of_messages == 1


def test_receive_several_then_delete_them(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    for i in range(4):
        jobs.send(f"m{i}")
    received = json.loads(run("receive", "jobs", "-n", "10", "--delete", "--json").stdout)
    assert sorted(m["body"] for m in received) == ["m0", "m1", "m2", "m3"]
    assert jobs.peek() == []
    jobs.send("last")
    assert "deleted 1 of 1 messages" in run("receive", "jobs", "--delete").stdout
    assert jobs.peek() == []


def test_receive_from_an_empty_queue(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    assert run("receive", "jobs").stdout == "no messages\n"
    assert json.loads(run("receive", "jobs", "--json").stdout) == []
    too_many = run("receive", "jobs", "-n", "11", code=1)
    assert too_many.stderr.startswith("error: InvalidParameterValue: --max-messages must be from 1 to 10")


def test_delete_by_receipt_handles_in_batches(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    for i in range(13):
        jobs.send(f"m{i}")
    handles = [m.receipt_handle for _ in range(2) for m in jobs.receive(10)]
    assert len(handles) == 13
    assert run("delete", "jobs", *handles).stdout == "deleted 13 of 13 messages\n"
    assert jobs.peek() == []


def test_delete_reports_each_receipt_that_failed(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    jobs.send("a")
    (message,) = jobs.receive()
    result = run("delete", "jobs", message.receipt_handle, "garbage", "--json", code=1)
    assert json.loads(result.stdout)["deleted"] == 1
    assert result.stderr.splitlines() == [
        "receipt 2: ReceiptHandleIsInvalid: receipt handle 'garbage' is malformed; "
        "use a handle returned by receive",
        "error: EntriesFailed: 1 of 2 deletes failed",
    ]
    assert jobs.peek() == []


def test_change_visibility(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    jobs.send("a")
    (message,) = jobs.receive(visibility_timeout=600)
    assert jobs.receive() == []
    released = run("change-visibility", "jobs", message.receipt_handle, "0")
    assert released.stdout == "the message is visible again\n"
    (again,) = jobs.receive(visibility_timeout=600)
    report = json.loads(run("change-visibility", "jobs", again.receipt_handle, "120", "--json").stdout)
    assert report == {"receipt_handle": again.receipt_handle, "visibility_timeout": 120}
    stale = run("change-visibility", "jobs", message.receipt_handle, "0", code=1)
    assert stale.stderr.startswith("error: MessageNotInflight: ")
    run("change-visibility", "jobs", again.receipt_handle, "soon", code=2)


def test_peek_shows_states_without_changing_anything(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    jobs.send("visible one")
    jobs.send("later", delay_seconds=900)
    jobs.send("taken")
    jobs.receive()  # the oldest visible: "visible one"
    everything = json.loads(run("peek", "jobs", "--json").stdout)
    assert [(m["body"], m["state"]) for m in everything] == [
        ("visible one", "in_flight"),
        ("later", "delayed"),
        ("taken", "visible"),
    ]
    in_flight = json.loads(run("peek", "jobs", "--state", "in-flight", "--json").stdout)
    assert [m["body"] for m in in_flight] == ["visible one"]
    delayed = json.loads(run("peek", "jobs", "--state", "delayed", "--json").stdout)
    assert [m["body"] for m in delayed] == ["later"]
    assert len(json.loads(run("peek", "jobs", "--limit", "1", "--json").stdout)) == 1
    table = run("peek", "jobs", "--state", "visible").stdout
    assert "taken" in table and "later" not in table
    assert [m.receive_count for m in jobs.peek()] == [1, 0, 0]  # peeking received nothing
    run("peek", "jobs", "--state", "gone", code=2)
    run("peek", "jobs", "--limit", "0", code=1)
