"""durableq queue ...: each command's effect, checked through the library."""

from __future__ import annotations

import json

import durableq
from durableq import RedriveAllowPolicy, RedrivePolicy

from .conftest import Run


def test_create_a_standard_queue_with_settings(run: Run, broker: durableq.Broker) -> None:
    run("queue", "create", "jobs-dlq")
    result = run(
        "queue", "create", "jobs",
        "--visibility-timeout", "60", "--delay", "5", "--retention", "3600", "--wait", "2",
        "--max-size", "2048", "--dlq", "jobs-dlq", "--max-receives", "4",
        "--tag", "team=imaging", "--tag", "cost=42",
    )  # fmt: skip
    assert result.stdout == "created standard queue jobs\n"
    attributes = broker.get_queue("jobs").attributes()
    assert attributes["visibility_timeout"] == 60
    assert attributes["delay_seconds"] == 5
    assert attributes["retention_period"] == 3600
    assert attributes["receive_wait_time"] == 2
    assert attributes["maximum_message_size"] == 2048
    assert attributes["redrive_policy"] == RedrivePolicy("jobs-dlq", 4)
    assert broker.get_queue("jobs").tags() == {"team": "imaging", "cost": "42"}


def test_create_a_fifo_queue(run: Run, broker: durableq.Broker) -> None:
    report = json.loads(
        run("queue", "create", "orders.fifo", "--fifo", "--content-dedup", "--dedup-scope", "messageGroup",
            "--redrive-allow", "denyAll", "--json").stdout
    )  # fmt: skip
    assert report["created"] is True and report["fifo"] is True
    attributes = broker.get_queue("orders.fifo").attributes()
    assert attributes["content_based_deduplication"] is True
    assert attributes["deduplication_scope"] == "messageGroup"
    assert attributes["redrive_allow_policy"] == RedriveAllowPolicy("denyAll")


def test_create_again_is_idempotent_but_other_settings_are_refused(run: Run) -> None:
    run("queue", "create", "jobs", "--visibility-timeout", "10")
    again = run("queue", "create", "jobs", "--visibility-timeout", "10")
    assert again.stdout == "queue jobs exists with these settings\n"
    refused = run("queue", "create", "jobs", "--visibility-timeout", "11", code=1)
    assert refused.stderr.startswith("error: QueueNameExists: queue 'jobs' exists with other attributes")


def test_create_checks_its_words(run: Run) -> None:
    assert "--dlq and --max-receives go together" in run("queue", "create", "a", "--dlq", "b", code=2).stderr
    run("queue", "create", "a", "--dedup-scope", "group", code=2)
    run("queue", "create", "a", "--tag", "novalue", code=2)
    run("queue", "create", "a", "--visibility-timeout", "soon", code=2)
    out_of_range = run("queue", "create", "a", "--visibility-timeout", "99999", code=1)
    assert out_of_range.stderr.startswith("error: InvalidAttributeValue: --visibility-timeout must be from")
    wrong_suffix = run("queue", "create", "a.fifo", code=1)
    assert "pass --fifo to create a FIFO queue" in wrong_suffix.stderr


def test_list_with_a_prefix(run: Run, broker: durableq.Broker) -> None:
    for name in ("orders", "orders-dlq", "users"):
        broker.create_queue(name)
    assert run("queue", "list").stdout == "orders\norders-dlq\nusers\n"
    assert json.loads(run("queue", "list", "--prefix", "ord", "--json").stdout) == ["orders", "orders-dlq"]
    assert run("queue", "list", "--prefix", "zzz").stdout == "no queues\n"


def test_show_prints_settings_tags_sources_and_depth(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs-dlq", redrive_allow_policy=RedriveAllowPolicy("byQueue", ["jobs"]))
    jobs = broker.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 5), tags={"team": "x"})
    jobs.send("one")
    jobs.send("two", delay_seconds=900)
    text = run("queue", "show", "jobs").stdout
    assert "redrive_policy:" in text and "jobs-dlq:5" in text
    assert "team=x" in text
    shown = json.loads(run("queue", "show", "jobs", "--json").stdout)
    assert shown["stats"]["approximate_number_of_messages"] == 1
    assert shown["stats"]["approximate_number_of_messages_delayed"] == 1
    assert shown["redrive_policy"] == {"dead_letter_queue": "jobs-dlq", "max_receive_count": 5}
    dlq = json.loads(run("queue", "show", "jobs-dlq", "--json").stdout)
    assert dlq["dead_letter_source_queues"] == ["jobs"]
    assert "byQueue:jobs" in run("queue", "show", "jobs-dlq").stdout
    missing = run("queue", "show", "nope", code=1)
    assert missing.stderr == "error: QueueDoesNotExist: queue 'nope' does not exist\n"


def test_set_converts_values_and_accepts_dashes(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs-dlq")
    broker.create_queue("jobs")
    broker.create_queue("orders.fifo", fifo=True)
    run("queue", "set", "jobs", "visibility-timeout=120", "delay_seconds=3", "redrive_policy=jobs-dlq:7")
    attributes = broker.get_queue("jobs").attributes()
    assert (attributes["visibility_timeout"], attributes["delay_seconds"]) == (120, 3)
    assert attributes["redrive_policy"] == RedrivePolicy("jobs-dlq", 7)
    run("queue", "set", "jobs", "redrive-policy=none")
    assert broker.get_queue("jobs").attributes()["redrive_policy"] is None
    run("queue", "set", "jobs-dlq", "redrive_allow_policy=byQueue:jobs,other")
    allow = broker.get_queue("jobs-dlq").attributes()["redrive_allow_policy"]
    assert allow == RedriveAllowPolicy("byQueue", ("jobs", "other"))
    result = run("queue", "set", "orders.fifo", "content-based-deduplication=TRUE", "--json")
    shown = json.loads(result.stdout)
    assert shown["content_based_deduplication"] is True
    assert broker.get_queue("orders.fifo").attributes()["content_based_deduplication"] is True


def test_set_refuses_unknown_keys_and_bad_values(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    unknown = run("queue", "set", "jobs", "colour=blue", code=1)
    assert unknown.stderr.startswith("error: InvalidAttributeName: 'colour' is not a queue attribute")
    fifo_only = run("queue", "set", "jobs", "deduplication_scope=queue", code=1)
    assert fifo_only.stderr.startswith("error: InvalidAttributeName: ")
    not_a_number = run("queue", "set", "jobs", "visibility_timeout=soon", code=1)
    assert "must be an integer from 0 to 43200" in not_a_number.stderr
    assert "DLQ:MAX_RECEIVES" in run("queue", "set", "jobs", "redrive_policy=jobs-dlq", code=2).stderr
    run("queue", "set", "jobs", "novalue", code=2)
    run("queue", "set", "jobs", code=2)
    assert broker.get_queue("jobs").attributes()["visibility_timeout"] == 30


def test_delete_and_purge(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    for body in ("a", "b", "c"):
        jobs.send(body)
    jobs.receive()
    assert json.loads(run("queue", "purge", "jobs", "--json").stdout) == {"purged": "jobs"}
    assert jobs.peek() == []
    assert run("queue", "delete", "jobs").stdout == "deleted queue jobs (it held no messages)\n"
    assert broker.list_queues() == []
    run("queue", "delete", "jobs", code=1)


def test_tags(run: Run, broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    run("queue", "tag", "jobs", "team=imaging", "cost center=42", "empty=")
    assert jobs.tags() == {"team": "imaging", "cost center": "42", "empty": ""}
    assert json.loads(run("queue", "tags", "jobs", "--json").stdout) == jobs.tags()
    assert "imaging" in run("queue", "tags", "jobs").stdout
    assert json.loads(run("queue", "untag", "jobs", "team", "absent", "--json").stdout) == {
        "cost center": "42",
        "empty": "",
    }
    run("queue", "untag", "jobs", "cost center", "empty")
    assert run("queue", "tags", "jobs").stdout == "no tags\n"
    bad = run("queue", "tag", "jobs", "bad<key>=1", code=1)
    assert bad.stderr.startswith("error: InvalidParameterValue: tag key")
