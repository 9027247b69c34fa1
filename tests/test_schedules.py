"""Schedules on a broker (both engines), with the fake clock: the calls and their audit rows, what
arrives, start and end, catch-up modes, flexible windows, pause and resume, and each tick sent once
however many brokers fire at once.  ``broker.fire_due_schedules()`` is one round of a scheduler."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest

import durableq

from .conftest import START, FakeClock

T0 = datetime.fromtimestamp(START, UTC)  # 2027-01-15 08:00:00 UTC, a Friday


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def scheduled_times(queue: durableq.Queue) -> list[str]:
    """The DurableQ.ScheduledTime of every message in ``queue`` (received, deleted), oldest first."""
    found: list[str] = []
    while batch := queue.receive(10):
        for message in batch:
            found.append(str(message.attributes["DurableQ.ScheduledTime"].value))
            queue.delete(message.receipt_handle)
    return sorted(found)


def fire(broker: durableq.Broker) -> list[str]:
    return [sent.scheduled_time.strftime("%H:%M:%S") for sent in broker.fire_due_schedules().sent]


# -- the calls -------------------------------------------------------------------------------------


def test_create_get_list_update_delete(broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    created = broker.create_schedule("every-minute", "jobs", "rate(1 minute)", "tick", attributes={"n": 1})
    assert created.next_fire == T0  # a rate's first tick is at once
    assert created.attributes == {"n": durableq.Attribute("Number", "1")}
    assert broker.get_schedule("every-minute") == created
    broker.create_schedule("noon", "jobs", "cron(0 12 ? * MON-FRI *)", "lunch", timezone="Europe/Paris")
    assert [s.name for s in broker.list_schedules()] == ["every-minute", "noon"]
    assert [s.name for s in broker.list_schedules("no")] == ["noon"]
    assert broker.list_schedules("no\x00") == []  # (a NUL, which PostgreSQL's text cannot hold)
    assert broker.get_schedule("noon").next_fire == datetime(2027, 1, 15, 11, 0, tzinfo=UTC)
    changed = broker.update_schedule("noon", expression="cron(0 13 ? * MON-FRI *)", body="late lunch")
    assert (changed.body, changed.next_fire) == ("late lunch", datetime(2027, 1, 15, 12, 0, tzinfo=UTC))
    assert broker.get_schedule("noon") == changed
    broker.delete_schedule("noon")
    with pytest.raises(durableq.ResourceNotFoundException, match="no schedule named 'noon'"):
        broker.get_schedule("noon")
    with pytest.raises(durableq.ResourceNotFoundException):
        broker.delete_schedule("noon")
    actions = [(e.action, e.queue, e.outcome, e.detail.get("schedule")) for e in broker.audit()]
    assert actions[-5:] == [
        ("CreateSchedule", "jobs", "OK", "every-minute"),
        ("CreateSchedule", "jobs", "OK", "noon"),
        ("UpdateSchedule", "jobs", "OK", "noon"),
        ("DeleteSchedule", "jobs", "OK", "noon"),
        ("DeleteSchedule", None, "ResourceNotFoundException", None),
    ]


def test_the_same_definition_again_is_the_schedule_another_is_refused(broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    first = broker.create_schedule("s", "jobs", "rate(1 hour)", "x")
    assert broker.create_schedule("s", "jobs", "rate(1 hour)", "x") == first
    with pytest.raises(
        durableq.InvalidParameterValue, match="exists with another definition; update_schedule"
    ):
        broker.create_schedule("s", "jobs", "rate(2 hours)", "x")


#: Bad arguments of create_schedule, each with what its error says.
BAD_ARGUMENTS: list[tuple[dict[str, object], str]] = [
    ({"name": "a b"}, "name must be 1 to 64 characters"),
    ({"name": "x" * 65}, "name must be 1 to 64 characters"),
    ({"queue": "no queue"}, "queue"),
    ({"expression": "cron(0 12 * * * *)"}, "exactly one of day-of-month and day-of-week must be ?"),
    ({"expression": "at(2020-01-01T00:00:00)"}, "has no tick from now on"),
    ({"expression": "cron(0 0 30 2 ? *)"}, "has no tick from now on"),
    ({"body": ""}, "body"),
    ({"timezone": "Moon/Base"}, "timezone must be an IANA time zone name"),
    ({"flexible_window": -1}, "flexible_window must be from 0 to 86400 seconds"),
    ({"catch_up": "some"}, "catch_up must be one of latest, all, none"),
    ({"enabled": "yes"}, "enabled must be True or False"),
    ({"attributes": {"DurableQ.ScheduleName": "x"}}, "is durableq's own"),
    ({"attributes": {f"a{i}": "v" for i in range(9)}}, "at most 8 attributes"),
    ({"start": at(60), "end": at(30)}, "end must come after start"),
    ({"start": "tomorrow"}, "start must be a datetime"),
    ({"start": datetime.max}, "start must be from 1970 to the end of 2199"),
    ({"end": datetime(1969, 12, 31, tzinfo=UTC)}, "end must be from 1970 to the end of 2199"),
]


def test_bad_arguments_say_what_is_wrong(broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    for arguments, says in BAD_ARGUMENTS:
        call: dict[str, object] = {"name": "s", "queue": "jobs", "expression": "rate(1 minute)", "body": "x"}
        call.update(arguments)
        with pytest.raises(durableq.InvalidParameterValue) as raised:
            broker.create_schedule(**call)  # type: ignore[arg-type]
        assert says in str(raised.value), arguments
        assert broker.audit()[-1].outcome == "InvalidParameterValue"
    assert broker.list_schedules() == []


def test_the_queue_must_exist(broker: durableq.Broker) -> None:
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.create_schedule("s", "nowhere", "rate(1 minute)", "x")
    broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 minute)", "x")
    with pytest.raises(durableq.QueueDoesNotExist):
        broker.update_schedule("s", queue="nowhere")
    assert broker.get_schedule("s").queue == "jobs"
    assert [e.outcome for e in broker.audit()][-1] == "QueueDoesNotExist"


def test_update_needs_a_known_setting(broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 minute)", "x")
    with pytest.raises(durableq.InvalidParameterValue, match="name at least one setting"):
        broker.update_schedule("s")
    with pytest.raises(durableq.InvalidParameterValue, match="'colour' is not a setting of a schedule"):
        broker.update_schedule("s", colour="red")
    with pytest.raises(durableq.ResourceNotFoundException):
        broker.update_schedule("t", body="y")


# -- what arrives ----------------------------------------------------------------------------------


def test_each_tick_arrives_once_with_its_attributes(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("beat", "jobs", "rate(10 seconds)", "ping", attributes={"kind": "beat"})
    assert fire(broker) == ["08:00:00"]
    assert fire(broker) == []  # nothing due until the next tick
    clock.advance(9.9)
    assert fire(broker) == []
    clock.advance(0.1)
    assert fire(broker) == ["08:00:10"]
    [first, second] = jobs.receive(10)
    assert (first.body, second.body) == ("ping", "ping")
    assert first.attributes == {
        "kind": durableq.Attribute("String", "beat"),
        "DurableQ.ScheduleName": durableq.Attribute("String", "beat"),
        "DurableQ.ScheduledTime": durableq.Attribute("String", "2027-01-15T08:00:00Z"),
    }
    assert broker.get_schedule("beat").last_fire == at(10)


def test_a_fifo_target_gets_the_name_as_group_and_name_and_time_as_deduplication_id(
    broker: durableq.Broker,
) -> None:
    orders = broker.create_queue("orders.fifo", fifo=True)
    broker.create_schedule("close-day", "orders.fifo", "rate(1 day)", "close")
    assert fire(broker) == ["08:00:00"]
    [message] = orders.receive()
    assert (message.group_id, message.deduplication_id) == ("close-day", "close-day@2027-01-15T08:00:00Z")


def test_start_and_end_bound_the_ticks(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 minute)", "x", start=at(120), end=at(300), catch_up="all")
    assert broker.get_schedule("s").next_fire == at(120)  # a rate counts from its start
    assert fire(broker) == []
    clock.advance(600)
    assert fire(broker) == ["08:02:00", "08:03:00", "08:04:00", "08:05:00"]
    assert broker.get_schedule("s").next_fire is None  # none left after the end
    assert len(scheduled_times(jobs)) == 4


def test_at_fires_once(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("launch", "jobs", "at(2027-01-15T09:30:00)", "go", timezone="Europe/Paris")
    assert broker.get_schedule("launch").next_fire == at(1_800)  # 09:30 in Paris is 08:30 UTC
    clock.advance(1_800)
    assert fire(broker) == ["08:30:00"]
    clock.advance(86_400)
    assert fire(broker) == []
    assert scheduled_times(jobs) == ["2027-01-15T08:30:00Z"]


# -- catching up -----------------------------------------------------------------------------------


#: Each catch-up mode, and the ticks it sends around a downtime (see the test).
CATCH_UP = {
    "all": ["08:00:00", "08:05:00", "08:10:00", "08:15:00", "08:20:00", "08:25:00"],
    "latest": ["08:00:00", "08:25:00"],
    "none": ["08:00:00"],
}


def test_catch_up_after_downtime(broker: durableq.Broker, clock: FakeClock) -> None:
    for mode in CATCH_UP:
        broker.create_queue(mode)
        broker.create_schedule(mode, mode, "rate(5 minutes)", "x", catch_up=mode)
    fired = broker.fire_due_schedules().sent
    clock.advance(27 * 60)  # no scheduler for 27 minutes: five ticks missed, the latest 2 minutes late
    fired += broker.fire_due_schedules().sent
    for mode, expected in CATCH_UP.items():
        assert [t.scheduled_time.strftime("%H:%M:%S") for t in fired if t.schedule == mode] == expected, mode
        assert broker.get_schedule(mode).next_fire == at(30 * 60)  # on from the next tick after now
        assert len(scheduled_times(broker.get_queue(mode))) == len(expected)


def test_catch_up_none_still_sends_a_tick_that_is_only_a_little_late(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(5 minutes)", "x", catch_up="none")
    fire(broker)
    clock.advance(5 * 60 + 30)  # 30 s late: within the grace
    assert fire(broker) == ["08:05:00"]


# -- flexible windows ------------------------------------------------------------------------------


def test_a_flexible_window_sends_each_tick_within_it(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 hour)", "x", flexible_window=600, start=at(3_600))
    sent = []
    for _ in range((3 * 3_600 + 660) // 60):  # three hours and the last window, a minute at a time
        sent += [(clock(), tick) for tick in broker.fire_due_schedules().sent]
        clock.advance(60)
    assert [tick.scheduled_time for _, tick in sent] == [at(3_600), at(7_200), at(10_800)]
    for now, tick in sent:
        delay = now - tick.scheduled_time.timestamp()
        assert 0 <= delay < 600 + 60  # within the window (and the round's minute)
    assert len(scheduled_times(jobs)) == 3


def test_a_window_longer_than_the_interval_skips_no_tick(broker: durableq.Broker, clock: FakeClock) -> None:
    """A tick whose window has not passed is not missed: catch_up="latest" must not jump over it."""
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(5 minutes)", "x", flexible_window=900)
    for _ in range(60):  # an hour, a minute at a time, a scheduler running throughout
        broker.fire_due_schedules()
        clock.advance(60)
    sent = scheduled_times(jobs)
    assert len(sent) == len(set(sent))
    assert sent[:9] == [at(300 * n).strftime("%Y-%m-%dT%H:%M:%SZ") for n in range(9)]


# -- pause and resume ------------------------------------------------------------------------------


def test_a_paused_schedule_sends_nothing_and_resumes_from_now(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 minute)", "x", catch_up="all")
    assert fire(broker) == ["08:00:00"]
    paused = broker.update_schedule("s", enabled=False)
    assert (paused.enabled, paused.next_fire) == (False, None)
    clock.advance(600)
    assert fire(broker) == []
    resumed = broker.update_schedule("s", enabled=True)
    assert resumed.next_fire == at(600)  # the ticks of the pause are not caught up, even with "all"
    assert fire(broker) == ["08:10:00"]
    assert len(scheduled_times(jobs)) == 2
    assert broker.create_schedule("t", "jobs", "rate(1 minute)", "x", enabled=False).next_fire is None
    clock.advance(120)
    assert fire(broker) == ["08:11:00", "08:12:00"]  # s's (catch_up="all"); t, created paused: nothing


# -- failures --------------------------------------------------------------------------------------


def test_a_tick_that_cannot_be_sent_is_logged_and_skipped(
    broker: durableq.Broker, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="durableq.schedules.firing")
    broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 minute)", "x")
    broker.delete_queue("jobs")
    assert fire(broker) == []
    assert (
        "schedule s: the tick 2027-01-15T08:00:00Z could not be sent to jobs (QueueDoesNotExist"
        in caplog.text
    )
    assert broker.get_schedule("s").next_fire == at(60)  # on to the next tick, not retried each round
    jobs = broker.create_queue("jobs")
    clock.advance(60)
    assert fire(broker) == ["08:01:00"]
    assert scheduled_times(jobs) == ["2027-01-15T08:01:00Z"]


# -- exactly once ----------------------------------------------------------------------------------


def test_brokers_firing_at_once_send_each_tick_once(target: str, clock: FakeClock) -> None:
    brokers = [durableq.open(target, clock=clock, durability="normal") for _ in range(4)]
    try:
        jobs = brokers[0].create_queue("jobs")
        brokers[0].create_schedule("s", "jobs", "rate(1 second)", "x", catch_up="all")
        sent: list[datetime] = []
        for _ in range(20):
            barrier = threading.Barrier(len(brokers))

            def round_of(broker: durableq.Broker, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                sent.extend(tick.scheduled_time for tick in broker.fire_due_schedules().sent)

            threads = [threading.Thread(target=round_of, args=(b,)) for b in brokers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            clock.advance(1)
        assert sorted(sent) == [at(n) for n in range(20)]
        assert scheduled_times(jobs) == [at(n).strftime("%Y-%m-%dT%H:%M:%SZ") for n in range(20)]
    finally:
        for broker in brokers:
            broker.close()
