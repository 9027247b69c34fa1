"""Dead letters: redrive inside receive, allow policies, source queues, message move tasks."""

from __future__ import annotations

import time

import pytest

import durableq
from durableq import RedriveAllowPolicy, RedrivePolicy
from tests.conftest import FakeClock


@pytest.fixture
def pair(broker: durableq.Broker) -> tuple[durableq.Queue, durableq.Queue]:
    dead = broker.create_queue("jobs-dlq")
    jobs = broker.create_queue("jobs", visibility_timeout=10, redrive_policy=RedrivePolicy("jobs-dlq", 3))
    return jobs, dead


def _fail(queue: durableq.Queue, clock: FakeClock, times: int) -> None:
    for _ in range(times):
        assert len(queue.receive()) == 1
        clock.advance(10)


def test_a_message_received_too_often_moves_to_the_dead_letter_queue(pair, clock: FakeClock) -> None:
    jobs, dead = pair
    sent = jobs.send("poison", attributes={"kind": "bad"})
    _fail(jobs, clock, 3)
    assert jobs.receive() == []  # the 4th receive moves it instead of returning it
    [moved] = dead.receive()
    assert moved.message_id == sent.message_id
    assert moved.body == "poison" and moved.attributes["kind"].value == "bad"
    assert moved.receive_count == 4  # kept its 3 receives, plus this one
    assert moved.dead_letter_source == "jobs"
    assert moved.sent_timestamp == int((clock() - 30) * 1000)  # a standard message keeps its enqueue time
    assert sum(m.moved_to_dead_letter for m in jobs.metrics()) == 1


def test_the_move_happens_in_the_receive_that_would_return_it(pair, clock: FakeClock) -> None:
    jobs, dead = pair
    jobs.send("poison")
    _fail(jobs, clock, 3)
    jobs.send("fine")
    clock.advance(1)
    # One receive: the poison goes to the dead-letter queue and the next message comes back.
    assert [m.body for m in jobs.receive(1)] == ["fine"]
    assert dead.stats().approximate_number_of_messages == 1


def test_retention_keeps_counting_for_a_standard_dead_letter(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    broker.create_queue("dlq", retention_period=100)
    jobs = broker.create_queue("jobs", visibility_timeout=10, redrive_policy=RedrivePolicy("dlq", 1))
    jobs.send("x")
    _fail(jobs, clock, 1)
    jobs.receive()
    clock.advance(80)  # 90 s after the send: past the dead-letter queue's 100 s? not yet
    assert broker.get_queue("dlq").stats().approximate_number_of_messages == 1
    clock.advance(10)
    assert broker.get_queue("dlq").receive() == []


def test_redrive_policy_checks(broker: durableq.Broker) -> None:
    broker.create_queue("dlq")
    broker.create_queue("dlq.fifo", fifo=True)
    with pytest.raises(durableq.InvalidAttributeValue, match="does not exist"):
        broker.create_queue("a", redrive_policy=RedrivePolicy("missing", 3))
    with pytest.raises(durableq.InvalidAttributeValue, match="standard too"):
        broker.create_queue("a", redrive_policy=RedrivePolicy("dlq.fifo", 3))
    with pytest.raises(durableq.InvalidAttributeValue, match="FIFO too"):
        broker.create_queue("a.fifo", fifo=True, redrive_policy=RedrivePolicy("dlq", 3))
    with pytest.raises(durableq.InvalidAttributeValue, match="its own dead-letter queue"):
        broker.create_queue("dlq", redrive_policy=RedrivePolicy("dlq", 3))
    for count in (0, 1001, "3"):
        with pytest.raises(durableq.InvalidAttributeValue, match="max_receive_count must be"):
            broker.create_queue("a", redrive_policy=RedrivePolicy("dlq", count))  # type: ignore[arg-type]
    with pytest.raises(durableq.InvalidAttributeValue, match="RedrivePolicy"):
        broker.create_queue("a", redrive_policy={"dead_letter_queue": "dlq"})  # type: ignore[arg-type]
    assert broker.create_queue("a", redrive_policy=RedrivePolicy("dlq", 1000)).attributes()[
        "redrive_policy"
    ] == RedrivePolicy("dlq", 1000)


def test_redrive_allow_policy(broker: durableq.Broker) -> None:
    broker.create_queue("closed", redrive_allow_policy=RedriveAllowPolicy("denyAll"))
    broker.create_queue("picky", redrive_allow_policy=RedriveAllowPolicy("byQueue", ["friend"]))
    broker.create_queue("open", redrive_allow_policy=RedriveAllowPolicy("allowAll"))
    with pytest.raises(durableq.InvalidAttributeValue, match="denyAll"):
        broker.create_queue("a", redrive_policy=RedrivePolicy("closed", 2))
    with pytest.raises(durableq.InvalidAttributeValue, match="byQueue"):
        broker.create_queue("stranger", redrive_policy=RedrivePolicy("picky", 2))
    broker.create_queue("friend", redrive_policy=RedrivePolicy("picky", 2))
    stranger = broker.create_queue("stranger")
    with pytest.raises(durableq.InvalidAttributeValue):
        stranger.set_attributes(redrive_policy=RedrivePolicy("picky", 2))
    stranger.set_attributes(redrive_policy=RedrivePolicy("open", 2))
    assert broker.get_queue("picky").attributes()["redrive_allow_policy"] == RedriveAllowPolicy(
        "byQueue", ("friend",)
    )


def test_redrive_allow_policy_limits(broker: durableq.Broker) -> None:
    with pytest.raises(durableq.InvalidAttributeValue, match="1 to 10 source queues"):
        broker.create_queue(
            "d", redrive_allow_policy=RedriveAllowPolicy("byQueue", [f"q{i}" for i in range(11)])
        )
    with pytest.raises(durableq.InvalidAttributeValue, match="1 to 10 source queues"):
        broker.create_queue("d", redrive_allow_policy=RedriveAllowPolicy("byQueue", []))
    with pytest.raises(durableq.InvalidAttributeValue, match="only allowed with permission byQueue"):
        broker.create_queue("d", redrive_allow_policy=RedriveAllowPolicy("allowAll", ["q"]))
    with pytest.raises(durableq.InvalidAttributeValue, match="one of allowAll, denyAll, byQueue"):
        broker.create_queue("d", redrive_allow_policy=RedriveAllowPolicy("everyone"))


def test_dead_letter_source_queues(broker: durableq.Broker) -> None:
    broker.create_queue("dlq")
    broker.create_queue("b", redrive_policy=RedrivePolicy("dlq", 2))
    broker.create_queue("a", redrive_policy=RedrivePolicy("dlq", 5))
    broker.create_queue("unrelated")
    assert broker.dead_letter_source_queues("dlq") == ["a", "b"]
    assert broker.dead_letter_source_queues("unrelated") == []
    broker.get_queue("a").set_attributes(redrive_policy=None)
    assert broker.dead_letter_source_queues("dlq") == ["b"]
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.dead_letter_source_queues("missing")


def test_a_policy_set_by_another_broker_applies_at_once(target: str, clock: FakeClock) -> None:
    with durableq.open(target, clock=clock) as one, durableq.open(target, clock=clock) as other:
        jobs = one.create_queue("jobs", visibility_timeout=10)
        jobs.send("x")
        _fail(jobs, clock, 2)
        other.create_queue("dlq")
        other.get_queue("jobs").set_attributes(redrive_policy=RedrivePolicy("dlq", 2))
        assert jobs.receive() == []  # received twice already: moved, not returned
        assert [m.body for m in one.get_queue("dlq").receive()] == ["x"]


def test_a_missing_dead_letter_queue_leaves_messages_where_they_are(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    broker.create_queue("dlq")
    jobs = broker.create_queue("jobs", visibility_timeout=10, redrive_policy=RedrivePolicy("dlq", 1))
    jobs.send("x")
    _fail(jobs, clock, 1)
    broker.delete_queue("dlq")
    assert len(jobs.receive()) == 1


# -- message move tasks --------------------------------------------------------


def _dead_letters(
    broker: durableq.Broker, clock: FakeClock, count: int
) -> tuple[durableq.Queue, durableq.Queue]:
    dead = broker.create_queue("jobs-dlq")
    jobs = broker.create_queue("jobs", visibility_timeout=10, redrive_policy=RedrivePolicy("jobs-dlq", 1))
    for i in range(count):
        jobs.send(f"m{i}")
    for _ in range(count):
        jobs.receive(10)
    clock.advance(10)
    while jobs.receive(10):  # each receive moves what it would have returned
        clock.advance(10)
    assert dead.stats().approximate_number_of_messages == count
    return jobs, dead


def test_a_move_task_sends_dead_letters_back_to_their_source(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    jobs, _ = _dead_letters(broker, clock, 25)
    task = broker.start_message_move("jobs-dlq")
    assert task.status == "RUNNING" and task.to_move == 25 and task.source == "jobs-dlq"
    broker.wait_for_message_move(task.task_handle, 30)
    [done] = broker.list_message_moves("jobs-dlq")
    assert (done.status, done.moved, done.to_move) == ("COMPLETED", 25, 25)
    back = []
    while batch := jobs.receive(10):
        back += batch
    assert sorted(m.body for m in back) == sorted(f"m{i}" for i in range(25))
    assert all(m.receive_count == 1 and m.dead_letter_source is None for m in back)


def test_a_move_task_to_a_named_destination(broker: durableq.Broker, clock: FakeClock) -> None:
    _dead_letters(broker, clock, 3)
    other = broker.create_queue("elsewhere")
    task = broker.start_message_move("jobs-dlq", destination="elsewhere")
    broker.wait_for_message_move(task.task_handle, 30)
    assert len(other.receive(10)) == 3
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.start_message_move("jobs-dlq", destination="missing")


def test_a_rate_limited_move_can_be_cancelled(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs, dead = _dead_letters(broker, clock, 30)
    task = broker.start_message_move("jobs-dlq", max_per_second=5)
    with pytest.raises(durableq.InvalidParameterValue, match="already running"):
        broker.start_message_move("jobs-dlq")
    # Real time: the rate is real.  Cancel once the task has moved some (and not all) messages.
    deadline = time.monotonic() + 30
    while broker.list_message_moves("jobs-dlq")[0].moved < 5:
        assert time.monotonic() < deadline, "the task moved nothing"
        time.sleep(0.05)
    cancelled = broker.cancel_message_move(task.task_handle)
    assert cancelled.status == "CANCELLING"
    broker.wait_for_message_move(task.task_handle, 30)
    [stopped] = broker.list_message_moves("jobs-dlq")
    assert stopped.status == "CANCELLED"
    assert 5 <= stopped.moved < 30
    assert jobs.stats().approximate_number_of_messages + dead.stats().approximate_number_of_messages == 30
    with pytest.raises(durableq.InvalidParameterValue, match="only a RUNNING task"):
        broker.cancel_message_move(task.task_handle)
    again = broker.start_message_move("jobs-dlq")  # a finished task frees the source
    broker.wait_for_message_move(again.task_handle, 30)
    assert [t.status for t in broker.list_message_moves("jobs-dlq")] == ["COMPLETED", "CANCELLED"]


def test_a_move_task_moves_out_of_a_dead_letter_queue_only(broker: durableq.Broker) -> None:
    """SQS's rule, in the library (the dashboard and the endpoint only pass it on): a queue that is
    no queue's dead-letter queue starts no move task, with or without a destination."""
    plain = broker.create_queue("plain")
    broker.create_queue("elsewhere")
    plain.send("not a dead letter")
    for destination in (None, "elsewhere"):
        with pytest.raises(durableq.InvalidParameterValue, match="'plain' is no queue's dead-letter queue"):
            broker.start_message_move("plain", destination=destination)
    assert broker.list_message_moves("plain") == []
    assert plain.stats().approximate_number_of_messages == 1


def test_move_task_errors(broker: durableq.Broker) -> None:
    broker.create_queue("dlq")
    broker.create_queue("jobs", redrive_policy=RedrivePolicy("dlq", 3))
    with pytest.raises(durableq.ResourceNotFoundException):
        broker.cancel_message_move("no-such-task")
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.start_message_move("missing")
    with pytest.raises(durableq.InvalidParameterValue, match="max_per_second"):
        broker.start_message_move("dlq", max_per_second=0)
    with pytest.raises(durableq.InvalidParameterValue, match="destination other than its source"):
        broker.start_message_move("dlq", destination="dlq")
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.list_message_moves("missing")


def test_a_message_without_a_source_fails_the_task(broker: durableq.Broker) -> None:
    dead = broker.create_queue("dlq")
    broker.create_queue("jobs", redrive_policy=RedrivePolicy("dlq", 3))
    dead.send("sent directly, not dead-lettered")
    task = broker.start_message_move("dlq")
    broker.wait_for_message_move(task.task_handle, 30)
    [failed] = broker.list_message_moves("dlq")
    assert failed.status == "FAILED" and "no source queue" in (failed.failure_reason or "")
    assert dead.stats().approximate_number_of_messages == 1


# -- relocation: the rules every move keeps (issue 12) ------------------------------


def test_a_move_task_never_brings_back_an_expired_dead_letter(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    broker.create_queue("dlq", retention_period=60)
    jobs = broker.create_queue("jobs", visibility_timeout=10, redrive_policy=RedrivePolicy("dlq", 1))
    jobs.send("old")
    _fail(jobs, clock, 1)
    assert jobs.receive() == []  # "old" goes to the dead-letter queue
    clock.advance(55)  # 65 s after the send: expired in the dead-letter queue, not swept yet
    task = broker.start_message_move("dlq")
    broker.wait_for_message_move(task.task_handle, timeout=10)
    [done] = broker.list_message_moves("dlq")
    assert (done.status, done.moved) == ("COMPLETED", 0)
    assert jobs.receive() == []


def _fifo_dead_letters(broker: durableq.Broker, clock: FakeClock, bodies: list[str]) -> durableq.Queue:
    broker.create_queue("dlq.fifo", fifo=True)
    jobs = broker.create_queue(
        "jobs.fifo",
        fifo=True,
        content_based_deduplication=True,
        visibility_timeout=10,
        redrive_policy=RedrivePolicy("dlq.fifo", 1),
    )
    for body in bodies:
        jobs.send(body, group_id="x")
    for body in bodies:  # receive each once, let it time out, and the next receive dead-letters it
        assert [m.body for m in jobs.receive()] == [body]
        clock.advance(10)
    assert jobs.receive(10) == []
    return jobs


def test_a_fifo_group_moves_whole_and_never_overtakes_its_in_flight_head(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    jobs = _fifo_dead_letters(broker, clock, ["x0", "x1", "x2"])
    dead = broker.get_queue("dlq.fifo")
    [head] = dead.receive(1, visibility_timeout=300)  # x0 is held by a consumer of the dead-letter queue
    assert head.body == "x0"
    task = broker.start_message_move("dlq.fifo")
    broker.wait_for_message_move(task.task_handle, timeout=10)
    assert jobs.receive(10) == []  # x1 and x2 stayed behind their in-flight head
    dead.change_visibility(head.receipt_handle, 0)  # the consumer lets go
    task = broker.start_message_move("dlq.fifo")
    broker.wait_for_message_move(task.task_handle, timeout=10)
    assert [m.body for m in jobs.receive(10)] == ["x0", "x1", "x2"]
    metrics = jobs.metrics()
    assert sum(m.moved_in for m in metrics) == 3 and sum(m.moved_to_dead_letter for m in metrics) == 3


def test_a_fifo_move_keeps_sequence_order_when_the_clock_went_back(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    broker.create_queue("dlq.fifo", fifo=True)
    target = broker.create_queue("target.fifo", fifo=True)
    sources = [
        broker.create_queue(
            f"jobs{i}.fifo",
            fifo=True,
            content_based_deduplication=True,
            redrive_policy=RedrivePolicy("dlq.fifo", 1),
        )
        for i in (1, 2)
    ]
    for source, body in zip(sources, ("first", "second")):
        source.send(body, group_id="g")
        assert [m.body for m in source.receive(1, visibility_timeout=0)] == [body]
    clock.advance(100)
    assert sources[0].receive() == []  # "first" becomes the dead-letter queue's sequence 1, at t + 100
    clock.advance(-100)  # the clock steps back
    assert sources[1].receive() == []  # "second" becomes sequence 2, enqueued "earlier", at t
    clock.advance(200)
    task = broker.start_message_move("dlq.fifo", destination="target.fifo")
    broker.wait_for_message_move(task.task_handle, timeout=10)
    assert [m.body for m in target.receive(10)] == ["first", "second"]


def test_move_counters_balance_depth(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs, dead = _dead_letters(broker, clock, 4)
    task = broker.start_message_move("jobs-dlq")
    broker.wait_for_message_move(task.task_handle, timeout=10)
    moved_out = sum(m.moved_out for m in dead.metrics())
    moved_in = sum(m.moved_in for m in dead.metrics())
    assert (moved_in, moved_out) == (4, 4)
    assert sum(m.moved_in for m in jobs.metrics()) == 4
    jobs.purge()
    assert sum(m.purged for m in jobs.metrics()) == 4
