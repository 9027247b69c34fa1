"""Queues: creation rules, settings and their limits, listing, deletion, tags."""

from __future__ import annotations

import json

import pytest

import durableq
from durableq import limits
from durableq.ops import permissions
from tests.conftest import FakeClock, sql_run


def test_create_returns_a_queue_with_the_defaults(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    attributes = queue.attributes()
    assert queue.name == "jobs" and queue.fifo is False
    assert attributes["visibility_timeout"] == limits.DEFAULT_VISIBILITY_TIMEOUT == 30
    assert attributes["delay_seconds"] == 0
    assert attributes["retention_period"] == limits.DEFAULT_RETENTION_PERIOD == 345_600
    assert attributes["receive_wait_time"] == 0
    assert attributes["maximum_message_size"] == limits.DEFAULT_MAXIMUM_MESSAGE_SIZE == 1_048_576
    assert attributes["redrive_policy"] is None and attributes["redrive_allow_policy"] is None
    assert "content_based_deduplication" not in attributes


def test_create_with_identical_attributes_returns_the_existing_queue(broker: durableq.Broker) -> None:
    first = broker.create_queue("jobs", visibility_timeout=60)
    first.send("still here")
    again = broker.create_queue("jobs", visibility_timeout=60)
    assert again.stats().approximate_number_of_messages == 1


def test_create_with_other_attributes_raises_queue_name_exists(broker: durableq.Broker) -> None:
    broker.create_queue("jobs", visibility_timeout=60)
    with pytest.raises(durableq.QueueNameExists, match="visibility_timeout"):
        broker.create_queue("jobs", visibility_timeout=61)
    with pytest.raises(durableq.QueueNameExists, match="delay_seconds"):
        broker.create_queue("jobs", delay_seconds=0 + 1)


def test_create_compares_only_the_settings_given(broker: durableq.Broker) -> None:
    # As in SQS: an application that creates its queue at start-up keeps working after an
    # operator changed a setting the application does not mention.
    broker.create_queue("jobs").set_attributes(visibility_timeout=120)
    assert broker.create_queue("jobs").attributes()["visibility_timeout"] == 120
    assert broker.create_queue("jobs", visibility_timeout=120).attributes()["visibility_timeout"] == 120
    with pytest.raises(durableq.QueueNameExists):
        broker.create_queue("jobs", visibility_timeout=30)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 81,
        "has space",
        "dot.ted",
        "slash/",
        "émoji",
        "jobs.fifo",
        "'; DROP TABLE durableq_queues; --",
    ],
)
def test_bad_standard_queue_names_are_refused(broker: durableq.Broker, name: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="queue name"):
        broker.create_queue(name)
    assert broker.list_queues() == []


def test_queue_names_up_to_80_characters_are_allowed(broker: durableq.Broker) -> None:
    assert broker.create_queue("a" * 80).name == "a" * 80
    assert broker.create_queue("A-b_9").name == "A-b_9"


def test_fifo_names_end_in_fifo_counted_in_the_80(broker: durableq.Broker) -> None:
    assert broker.create_queue("f" * 75 + ".fifo", fifo=True).fifo
    with pytest.raises(durableq.InvalidParameterValue):
        broker.create_queue("f" * 76 + ".fifo", fifo=True)
    with pytest.raises(durableq.InvalidParameterValue, match=r"must end in \.fifo"):
        broker.create_queue("orders", fifo=True)


@pytest.mark.parametrize(
    ("setting", "low", "high"),
    [
        ("visibility_timeout", 0, 43_200),
        ("delay_seconds", 0, 900),
        ("retention_period", 60, 1_209_600),
        ("receive_wait_time", 0, 20),
        ("maximum_message_size", 1_024, 1_048_576),
    ],
)
def test_each_setting_accepts_its_range_and_refuses_outside(
    broker: durableq.Broker, setting: str, low: int, high: int
) -> None:
    assert broker.create_queue("low", **{setting: low}).attributes()[setting] == low
    assert broker.create_queue("high", **{setting: high}).attributes()[setting] == high
    for bad in (low - 1, high + 1, 1.5, "30", True, None):
        with pytest.raises(durableq.InvalidAttributeValue, match=f"{setting} must be"):
            broker.create_queue("bad", **{setting: bad})
    assert "bad" not in broker.list_queues()


def test_fifo_only_settings_are_refused_on_standard_queues(broker: durableq.Broker) -> None:
    with pytest.raises(durableq.InvalidAttributeName, match="FIFO queues only"):
        broker.create_queue("jobs", content_based_deduplication=True)
    with pytest.raises(durableq.InvalidAttributeName, match="FIFO queues only"):
        broker.create_queue("jobs", deduplication_scope="messageGroup")
    queue = broker.create_queue("jobs")
    with pytest.raises(durableq.InvalidAttributeName):
        queue.set_attributes(content_based_deduplication=False)


def test_set_attributes_changes_settings_and_last_modified(broker: durableq.Broker, clock: FakeClock) -> None:
    queue = broker.create_queue("jobs")
    created = queue.attributes()
    clock.advance(5)
    queue.set_attributes(visibility_timeout=90, delay_seconds=3)
    changed = queue.attributes()
    assert changed["visibility_timeout"] == 90 and changed["delay_seconds"] == 3
    assert changed["created_at"] == created["created_at"]
    assert (changed["last_modified"] - created["last_modified"]).total_seconds() == 5


def test_set_attributes_refuses_unknown_names_and_the_queue_type(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    with pytest.raises(durableq.InvalidAttributeName, match="not a queue attribute"):
        queue.set_attributes(colour="blue")
    with pytest.raises(durableq.InvalidAttributeName, match="type never changes"):
        queue.set_attributes(fifo=True)
    with pytest.raises(durableq.InvalidAttributeValue):
        queue.set_attributes(visibility_timeout=-1)
    assert queue.attributes()["visibility_timeout"] == 30


def test_a_setting_changed_by_another_broker_applies_at_once(target: str, clock: FakeClock) -> None:
    with durableq.open(target, clock=clock) as one, durableq.open(target, clock=clock) as other:
        queue = one.create_queue("jobs")
        queue.send("x")
        queue.receive()  # warms the first broker's cache of the queue
        other.get_queue("jobs").set_attributes(visibility_timeout=5, delay_seconds=10)
        queue.send("delayed by the new default")
        assert queue.stats().approximate_number_of_messages_delayed == 1
        clock.advance(10)
        received = queue.receive(visibility_timeout=None)
        assert [m.body for m in received] == ["delayed by the new default"]
        clock.advance(5)  # received with the new 5 s visibility timeout; "x" still has its old 30 s
        assert [m.body for m in queue.receive(10)] == ["delayed by the new default"]
        clock.advance(15)
        assert [m.body for m in queue.receive(10)] == ["x", "delayed by the new default"]


def test_a_queue_created_under_the_old_default_size_keeps_it(target: str, clock: FakeClock) -> None:
    # What a file made before SQS's 1 MiB default holds: the old default (256 KiB) in the queue's row.
    with durableq.open(target, clock=clock) as broker:
        broker.create_queue("old")
    assert sql_run(target, "UPDATE durableq_queues SET maximum_message_size = 262144 WHERE name = 'old'") == 1
    with durableq.open(target, clock=clock) as broker:
        old = broker.create_queue("old")  # no settings given: the existing queue, not QueueNameExists
        assert old.attributes()["maximum_message_size"] == 262_144
        with pytest.raises(durableq.InvalidParameterValue, match="allows at most 262144"):
            old.send("x" * 262_145)
        old.send("x" * 262_144)
        new = broker.create_queue("new")
        assert new.attributes()["maximum_message_size"] == 1_048_576
        new.send("x" * 1_048_576)
        old.set_attributes(maximum_message_size=limits.MAX_MAXIMUM_MESSAGE_SIZE)  # the way to the new size
        old.send("x" * 262_145)


def test_list_queues_is_sorted_and_filters_by_prefix(broker: durableq.Broker) -> None:
    for name in ("b-jobs", "a-jobs", "a_other", "c.fifo"):
        broker.create_queue(name, fifo=name.endswith(".fifo"))
    assert broker.list_queues() == ["a-jobs", "a_other", "b-jobs", "c.fifo"]
    assert broker.list_queues("a") == ["a-jobs", "a_other"]
    assert broker.list_queues("a_") == ["a_other"]  # '_' is not a wildcard
    assert broker.list_queues("zzz") == []


def test_get_queue_of_a_missing_name_raises(broker: durableq.Broker) -> None:
    with pytest.raises(durableq.QueueDoesNotExist, match="'nope' does not exist"):
        broker.get_queue("nope")


def test_delete_queue_deletes_its_messages_and_frees_the_name(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    queue.send("gone with the queue")
    broker.delete_queue("jobs")
    assert broker.list_queues() == []
    with pytest.raises(durableq.QueueDoesNotExist):
        queue.send("to nowhere")
    with pytest.raises(durableq.QueueDoesNotExist):
        queue.receive()
    again = broker.create_queue("jobs", fifo=False, visibility_timeout=10)
    assert again.receive() == []
    assert queue.attributes()["visibility_timeout"] == 10  # the name is the queue, like an SQS URL
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.delete_queue("never")


def test_a_queue_deleted_by_another_broker_is_seen_at_once(target: str, clock: FakeClock) -> None:
    with durableq.open(target, clock=clock) as one, durableq.open(target, clock=clock) as other:
        queue = one.create_queue("jobs")
        queue.send("x")
        [message] = queue.receive()
        other.delete_queue("jobs")
        with pytest.raises(durableq.QueueDoesNotExist):
            queue.send("y")
        with pytest.raises(durableq.QueueDoesNotExist):
            queue.receive()
        with pytest.raises(durableq.QueueDoesNotExist):
            queue.delete(message.receipt_handle)
        other.create_queue("jobs")
        with pytest.raises(durableq.ReceiptHandleIsInvalid, match="another queue"):
            queue.delete(message.receipt_handle)


def test_tags(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs", tags={"team": "billing"})
    assert queue.tags() == {"team": "billing"}
    queue.tag(env="prod", **{"cost:centre": "42"})
    queue.untag("team", "absent")
    assert queue.tags() == {"cost:centre": "42", "env": "prod"}
    queue.tag(env="staging")
    assert queue.tags()["env"] == "staging"


def test_tag_limits(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    queue.tag(**{f"k{i}": "v" for i in range(50)})
    with pytest.raises(durableq.InvalidParameterValue, match="at most 50 tags"):
        queue.tag(one_more="v")
    with pytest.raises(durableq.InvalidParameterValue, match="tag key"):
        queue.tag(**{"k" * 129: "v"})
    with pytest.raises(durableq.InvalidParameterValue, match="value"):
        queue.tag(k0="v" * 257)
    with pytest.raises(durableq.InvalidParameterValue, match="at most 50 tags"):
        broker.create_queue("other", tags={f"k{i}": "v" for i in range(51)})
    assert len(queue.tags()) == 50


def test_queue_attribute_values_are_typed(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    attributes = queue.attributes()
    assert attributes["created_at"].tzinfo is not None
    assert attributes["name"] == "jobs" and attributes["fifo"] is False


def test_sqs_client_settings_and_their_rules(broker: durableq.Broker) -> None:
    standard = broker.create_queue("std")
    attributes = standard.attributes()
    # SPEC §7: nothing is encrypted unless asked (SQS's own default is SQS-managed encryption).
    assert attributes["sqs_managed_sse_enabled"] is False and attributes["kms_master_key_id"] is None
    assert attributes["kms_data_key_reuse_period"] == 300 and attributes["policy"] is None
    standard.set_attributes(kms_master_key_id="alias/aws/sqs", kms_data_key_reuse_period=600)
    attributes = standard.attributes()
    assert attributes["kms_master_key_id"] == "alias/aws/sqs"
    assert attributes["sqs_managed_sse_enabled"] is False  # a KMS key replaces SQS-managed encryption
    with pytest.raises(durableq.InvalidAttributeValue, match="one kind of server-side encryption"):
        standard.set_attributes(sqs_managed_sse_enabled=True)
    with pytest.raises(durableq.InvalidAttributeValue, match="kms_data_key_reuse_period must be"):
        standard.set_attributes(kms_data_key_reuse_period=59)
    with pytest.raises(durableq.InvalidAttributeName, match="FIFO queues only"):
        standard.set_attributes(fifo_throughput_limit="perQueue")
    fifo = broker.create_queue("f.fifo", fifo=True)
    assert fifo.attributes()["fifo_throughput_limit"] == "perQueue"
    with pytest.raises(durableq.InvalidAttributeValue, match="needs deduplication_scope messageGroup"):
        fifo.set_attributes(fifo_throughput_limit="perMessageGroupId")
    fifo.set_attributes(deduplication_scope="messageGroup", fifo_throughput_limit="perMessageGroupId")
    assert fifo.attributes()["fifo_throughput_limit"] == "perMessageGroupId"


def test_a_policy_must_be_a_json_object(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs", policy='{"Version": "2012-10-17", "Statement": []}')
    assert queue.attributes()["policy"].startswith('{"Version"')
    for bad in ("not json", "[1, 2]", "x" * 20_481, 42):
        with pytest.raises(durableq.InvalidAttributeValue, match="policy"):
            queue.set_attributes(policy=bad)
    queue.set_attributes(policy="")
    assert queue.attributes()["policy"] is None


def test_permissions_are_statements_of_the_policy(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    queue.add_permission(
        "producers", ["111122223333"], ["SendMessage"], resource="arn:aws:sqs:us-east-1:1:jobs"
    )
    queue.add_permission("everything", ["444455556666", "111122223333"], ["*"])
    policy = json.loads(queue.attributes()["policy"])
    assert [s["Sid"] for s in policy["Statement"]] == ["producers", "everything"]
    assert policy["Id"] == "arn:aws:sqs:us-east-1:1:jobs/SQSDefaultPolicy"  # SQS's default policy id
    first, second = policy["Statement"]
    # As SQS writes them: one principal or action as a string, several as a list.
    assert first["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"}
    assert first["Action"] == "SQS:SendMessage" and first["Resource"] == "arn:aws:sqs:us-east-1:1:jobs"
    assert second["Principal"] == {
        "AWS": ["arn:aws:iam::444455556666:root", "arn:aws:iam::111122223333:root"]
    }
    assert ", " not in queue.attributes()["policy"]  # compact JSON
    with pytest.raises(durableq.InvalidParameterValue, match="already exists"):
        queue.add_permission("producers", ["111122223333"], ["SendMessage"])
    with pytest.raises(durableq.InvalidParameterValue, match="12 digits"):
        queue.add_permission("bad", ["12"], ["SendMessage"])
    with pytest.raises(durableq.InvalidParameterValue, match="action 'Fly'"):
        queue.add_permission("bad", ["111122223333"], ["Fly"])
    with pytest.raises(durableq.MissingParameter, match="account id"):
        queue.add_permission("bad", [], ["SendMessage"])
    with pytest.raises(durableq.MissingParameter, match="action"):
        queue.add_permission("bad", ["111122223333"], [])
    with pytest.raises(durableq.OverLimit, match="at most 7 actions"):  # SQS's limit per statement
        queue.add_permission("bad", ["111122223333"], list(permissions.ACTIONS[1:9]))
    queue.remove_permission("producers")
    queue.remove_permission("everything")
    assert queue.attributes()["policy"] is None
    with pytest.raises(durableq.InvalidParameterValue, match="no permission labelled"):
        queue.remove_permission("producers")
