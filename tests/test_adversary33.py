"""Adversary 33: where schedules break "each tick exactly once, however many schedulers run", or
burn a scheduler's round, when they meet clocks, catch-up, queue settings and encryption.

Each test is a finding, marked ``xfail(strict=True)`` until the library is fixed."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import durableq
from durableq import limits
from durableq.schedules import expressions

from .conftest import START, FakeClock, sql_run

T0 = datetime.fromtimestamp(START, UTC)  # 2027-01-15 08:00:00 UTC


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def scheduled_times(queue: durableq.Queue) -> list[str]:
    """The DurableQ.ScheduledTime of every message in ``queue`` (received, deleted), oldest first."""
    found: list[str] = []
    while batch := queue.receive(10):
        for message in batch:
            found.append(str(message.attributes["DurableQ.ScheduledTime"].value))
            queue.delete(message.receipt_handle)
    return sorted(found)


@pytest.mark.xfail(
    strict=True,
    reason="adversary 33, a documented limitation (docs/guides/schedules.md, Running schedulers): a "
    "scheduler fires by its own clock, so schedulers' clocks must agree (NTP); one an hour ahead sends a "
    "future tick early and, under catch_up='latest', the ticks before it are never sent",
)
def test_a_scheduler_whose_clock_is_ahead_loses_ticks_for_every_scheduler(
    target: str, clock: FakeClock
) -> None:
    ahead = FakeClock(START + 3_600)  # one host's clock an hour fast
    with (
        durableq.open(target, clock=clock, durability="normal") as good,
        durableq.open(target, clock=ahead, durability="normal") as skewed,
    ):
        jobs = good.create_queue("jobs")
        good.create_schedule("s", "jobs", "rate(10 minutes)", "x")  # catch_up="latest", the default
        skewed.fire_due_schedules()  # at 08:00 real time, it believes it is 09:00
        for _ in range(6):
            good.fire_due_schedules()
            clock.advance(600)
        good.fire_due_schedules()  # 09:00 real time
        assert scheduled_times(jobs) == [at(600 * n) for n in range(7)]


def test_catching_up_the_latest_cron_tick_does_not_walk_every_missed_minute(
    broker: durableq.Broker, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "cron(* * * * ? *)", "x")
    broker.fire_due_schedules()
    scheduled_times(jobs)
    clock.advance(86_400)  # one day down (1,440 missed minutes); a month is 43,200
    calls = 0
    following = expressions.Cron.following

    def counted(self: expressions.Cron, *args: object) -> int | None:
        nonlocal calls
        calls += 1
        return following(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(expressions.Cron, "following", counted)
    assert [s.scheduled_time for s in broker.fire_due_schedules().sent] == [T0 + timedelta(days=1)]
    assert calls < 100  # the latest tick found without a step per missed minute


def test_a_round_of_failing_ticks_is_bounded_by_the_batch(
    broker: durableq.Broker, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="durableq.schedules.firing")
    broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "rate(1 second)", "x", catch_up="all")
    broker.delete_queue("jobs")
    clock.advance(3 * limits.SCHEDULER_BATCH)
    broker.fire_due_schedules()
    skipped = caplog.text.count("could not be sent")
    assert skipped <= limits.SCHEDULER_BATCH


def test_a_body_too_large_for_the_queue_is_refused_when_the_schedule_is_made(
    broker: durableq.Broker,
) -> None:
    broker.create_queue("jobs", maximum_message_size=1_024)
    with pytest.raises(durableq.InvalidParameterValue):
        broker.create_schedule("s", "jobs", "rate(1 minute)", "x" * 1_024)


def test_a_body_that_just_fits_is_taken_and_sent_and_one_byte_more_is_refused_by_update(
    broker: durableq.Broker,
) -> None:
    jobs = broker.create_queue("jobs", maximum_message_size=1_024)
    names = "DurableQ.ScheduleName" + "String" + "s" + "DurableQ.ScheduledTime" + "String" + at(0)
    fits = "x" * (1_024 - len(names))  # the size rule exactly as a send counts it
    broker.create_schedule("s", "jobs", "rate(1 minute)", fits)
    with pytest.raises(durableq.InvalidParameterValue, match=r"1025 bytes.*at most 1024"):
        broker.update_schedule("s", body=fits + "x")
    assert [s.schedule for s in broker.fire_due_schedules().sent] == ["s"]
    assert [m.body for m in jobs.receive(10)] == [fits]


def test_a_scheduler_without_the_keyring_does_not_burn_an_encrypted_queues_ticks(
    target: str, clock: FakeClock, tmp_path: Path
) -> None:
    ring = durableq.Keyring(tmp_path / "keys.json")
    ring.create("orders")
    with (
        durableq.open(target, clock=clock, durability="normal", keyring=ring) as keyed,
        durableq.open(target, clock=clock, durability="normal") as keyless,
    ):
        orders = keyed.create_queue("orders", kms_master_key_id="alias/orders")
        keyed.create_schedule("s", "orders", "rate(1 minute)", "secret")
        keyless.fire_due_schedules()  # cannot encrypt: the tick should stay for one that can
        keyed.fire_due_schedules()
        assert scheduled_times(orders) == [at(0)]


def test_a_scheduler_that_cannot_send_a_due_tick_waits_its_poll_interval(
    target: str, clock: FakeClock, tmp_path: Path
) -> None:
    ring = durableq.Keyring(tmp_path / "keys.json")
    ring.create("orders")
    with (
        durableq.open(target, clock=clock, durability="normal", keyring=ring) as keyed,
        durableq.open(target, clock=clock, durability="normal") as keyless,
    ):
        keyed.create_queue("orders", kms_master_key_id="alias/orders")
        keyed.create_schedule("s", "orders", "rate(1 minute)", "secret")
        scheduler = durableq.Scheduler(keyless, poll_interval=2)
        assert scheduler._round() == 2  # the tick still due: not a loop that sleeps 0 s between rounds
        assert keyed.get_schedule("s").next_fire == T0


def test_one_schedule_this_host_cannot_read_does_not_stop_the_others(
    broker: durableq.Broker, target: str
) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("a", "jobs", "rate(1 minute)", "a", timezone="Europe/Paris")
    broker.create_schedule("b", "jobs", "rate(1 minute)", "b")
    # as another host's tzdata wrote it: a zone name this host's tzdata does not have
    sql_run(target, "UPDATE durableq_schedules SET timezone = 'America/Nowhere_New' WHERE name = 'a'")
    sent = broker.fire_due_schedules().sent
    assert [s.schedule for s in sent] == ["b"]
    assert [m.body for m in jobs.receive(10)] == ["b"]


@pytest.mark.parametrize("zone", ["localtime", "posixrules"])
def test_a_host_dependent_time_zone_is_refused(broker: durableq.Broker, zone: str) -> None:
    broker.create_queue("jobs")
    with pytest.raises(durableq.InvalidParameterValue, match="this host's own setting"):
        broker.create_schedule("s", "jobs", "rate(1 minute)", "x", timezone=zone)
    broker.create_schedule("s", "jobs", "rate(1 minute)", "x")
    with pytest.raises(durableq.InvalidParameterValue, match="this host's own setting"):
        broker.update_schedule("s", timezone=zone)
    assert broker.get_schedule("s").timezone == "UTC"


def test_an_at_in_the_skipped_spring_hour_is_skipped_like_a_cron_tick(broker: durableq.Broker) -> None:
    broker.create_queue("jobs")
    # Europe/London, 2027-03-28: 01:00 GMT jumps to 02:00 BST; 01:30 does not exist that night
    with pytest.raises(durableq.InvalidParameterValue, match="no tick"):  # the cron: refused, skipped
        broker.create_schedule("a", "jobs", "cron(30 1 28 3 ? 2027)", "x", timezone="Europe/London")
    with pytest.raises(durableq.InvalidParameterValue, match="no tick"):
        broker.create_schedule("b", "jobs", "at(2027-03-28T01:30:00)", "x", timezone="Europe/London")


def test_a_change_or_a_resume_in_the_second_of_a_tick_does_not_send_it_again(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "cron(* * * * ? *)", "x")
    assert len(broker.fire_due_schedules().sent) == 1  # 08:00:00
    clock.advance(0.5)
    broker.update_schedule("s", end=T0 + timedelta(days=1))  # the same timetable, a later end
    broker.fire_due_schedules()
    broker.update_schedule("s", enabled=False)
    broker.update_schedule("s", enabled=True)
    broker.fire_due_schedules()
    assert scheduled_times(jobs) == [at(0)]


def test_a_narrower_flexible_window_applies_to_the_pending_tick(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    jobs = broker.create_queue("jobs")
    broker.create_schedule("s", "jobs", "cron(0 9 * * ? *)", "x", flexible_window=limits.MAX_FLEXIBLE_WINDOW)
    broker.update_schedule("s", flexible_window=0)  # from now on, each tick at its time
    clock.advance(3_600)  # 09:00, the tick
    broker.fire_due_schedules()
    assert scheduled_times(jobs) == [at(3_600)]


@pytest.mark.postgres_only("SQLite keeps large payloads beside the file: every scheduler has the store")
def test_a_scheduler_without_a_payload_store_does_not_burn_large_ticks(
    target: str, clock: FakeClock, db_path: Path
) -> None:
    store = f"{db_path}.payloads"
    with (
        durableq.open(target, clock=clock, durability="normal", payload_dir=store) as stored,
        durableq.open(target, clock=clock, durability="normal") as storeless,
    ):
        big = stored.create_queue("big", large_payloads=True, maximum_message_size=1_024)
        stored.create_schedule("s", "big", "rate(1 minute)", "y" * 5_000)
        storeless.fire_due_schedules()  # cannot store the payload: the tick should stay
        stored.fire_due_schedules()
        assert scheduled_times(big) == [at(0)]


def test_a_schedule_deleted_and_made_again_mid_round_is_not_sent_as_the_old_one(
    target: str, clock: FakeClock
) -> None:
    with (
        durableq.open(target, clock=clock, durability="normal") as firing,
        durableq.open(target, clock=clock, durability="normal") as user,
    ):
        jobs = user.create_queue("jobs")
        user.create_schedule("a", "jobs", "rate(1 minute)", "a")
        clock.advance(1)
        user.create_schedule("b", "jobs", "rate(1 minute)", "old b")

        class RemakeB(logging.Handler):
            """After the round sends a's tick (and before it claims b's): b deleted and made anew."""

            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage().startswith("schedule a: sent tick"):
                    user.delete_schedule("b")
                    user.create_schedule("b", "jobs", "rate(1 hour)", "new b", start=T0 + timedelta(days=1))

        hook = RemakeB()
        logger = logging.getLogger("durableq.schedules.firing")
        logger.addHandler(hook)
        level = logger.level
        logger.setLevel(logging.INFO)
        try:
            firing.fire_due_schedules()
        finally:
            logger.removeHandler(hook)
            logger.setLevel(level)
        bodies = sorted(m.body for m in jobs.receive(10))
        assert bodies == ["a"]  # not "old b": that schedule was deleted before its tick was claimed
        assert user.get_schedule("b").next_fire == T0 + timedelta(days=1)


@pytest.mark.parametrize(
    "text",
    ["cron(* * * * ? *)", "cron(0/7 9-10 ? * MON-FRI *)", "cron(30 1 L * ? *)", "at(2027-01-20T10:00:00)"],
)
def test_the_latest_tick_sought_back_is_the_one_a_walk_tick_by_tick_finds(text: str) -> None:
    parsed, zone, start = expressions.parse(text), expressions.zone("Europe/London"), int(START * 1000)
    tick = parsed.following(start - 1, zone, start)
    assert tick is not None
    for days in (0.001, 0.3, 1.2) if text.startswith("cron(*") else (0.001, 0.3, 1.2, 5.5, 40, 100):
        until = start + int(days * 86_400_000)
        walked = tick
        while (later := parsed.following(walked, zone, start)) is not None and later <= until:
            walked = later
        assert parsed.latest(tick, until, zone, start) == walked
