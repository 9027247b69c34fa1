"""Schedule expressions (durableq/schedules/expressions.py): every form's next tick, EventBridge's
cron rules (``?``, ``L``, ``W``, ``#``, the year), time zones and daylight-saving changes as
EventBridge Scheduler documents them, and a clear error for each kind of bad expression.  Pure
functions of their inputs: times are given, no clock is read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import durableq
from durableq.schedules import expressions

ANCHOR = "2027-01-15T08:00:00+00:00"


def ms(text: str) -> int:
    moment = datetime.fromisoformat(text)
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def utc(tick: int | None) -> str | None:
    return None if tick is None else datetime.fromtimestamp(tick / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def ticks(
    expression: str, after: str, count: int = 1, tz: str = "UTC", anchor: str = ANCHOR
) -> list[str | None]:
    """The next ``count`` ticks of ``expression`` after ``after`` (UTC unless it has an offset)."""
    parsed, zone, found = expressions.parse(expression), expressions.zone(tz), []
    moment: int | None = ms(after)
    for _ in range(count):
        assert moment is not None
        moment = parsed.following(moment, zone, ms(anchor))
        found.append(utc(moment))
    return found


# -- rate ------------------------------------------------------------------------------------------


def test_a_rate_ticks_from_its_anchor_every_interval() -> None:
    assert ticks("rate(5 minutes)", "2027-01-15T07:00:00", 3) == [
        "2027-01-15 08:00:00",  # the anchor itself is the first tick
        "2027-01-15 08:05:00",
        "2027-01-15 08:10:00",
    ]
    assert ticks("rate(5 minutes)", "2027-01-15T08:07:30", 1) == ["2027-01-15 08:10:00"]
    assert ticks("rate(1 second)", "2027-01-15T08:00:00", 2) == ["2027-01-15 08:00:01", "2027-01-15 08:00:02"]
    assert ticks("rate(1 hour)", "2027-01-15T08:00:00", 1) == ["2027-01-15 09:00:00"]
    assert ticks("rate(2 days)", "2027-01-15T08:00:00", 1) == ["2027-01-17 08:00:00"]


def test_a_rate_of_days_is_24_hours_across_a_daylight_saving_change() -> None:
    """EventBridge: a day of a rate is 24 hours on the clock, whatever the wall clock does."""
    anchor = "2027-03-13T12:00:00-05:00"  # noon in New York, the day before clocks go forward
    found = ticks("rate(1 day)", anchor, 1, tz="America/New_York", anchor=anchor)
    assert found == ["2027-03-14 17:00:00"]  # 13:00 EDT: 24 hours later, not noon


def test_the_latest_tick_of_a_rate_is_counted_not_walked() -> None:
    parsed = expressions.parse("rate(1 second)")
    start = ms(ANCHOR)
    latest = parsed.latest(start, start + 86_400_000 * 365 + 500, expressions.zone("UTC"), start)
    assert latest == start + 86_400_000 * 365


# -- cron, EventBridge's six fields ------------------------------------------------------------------


def test_weekdays_at_noon_in_a_time_zone() -> None:
    # Friday 2027-01-15; Paris is UTC+1 in winter.
    assert ticks("cron(0 12 ? * MON-FRI *)", "2027-01-15T12:00:00", 2, tz="Europe/Paris") == [
        "2027-01-18 11:00:00",  # Monday (the weekend skipped)
        "2027-01-19 11:00:00",
    ]


def test_steps_lists_and_ranges() -> None:
    assert ticks("cron(0/15 9-10 ? * * *)", "2027-01-15T09:50:00", 3) == [
        "2027-01-15 10:00:00",
        "2027-01-15 10:15:00",
        "2027-01-15 10:30:00",
    ]
    assert ticks("cron(5,35 8 ? * * *)", "2027-01-15T08:10:00", 2) == [
        "2027-01-15 08:35:00",
        "2027-01-16 08:05:00",
    ]


def test_months_and_days_by_name_and_the_year_field() -> None:
    assert ticks("cron(0 0 1 JAN,jul ? 2028-2029)", "2027-01-15T00:00:00", 3) == [
        "2028-01-01 00:00:00",
        "2028-07-01 00:00:00",
        "2029-01-01 00:00:00",
    ]
    assert ticks("cron(0 0 1 1 ? 2028)", "2028-01-01T00:00:00") == [None]  # no year after it


def test_day_of_week_one_is_sunday() -> None:
    assert ticks("cron(0 10 ? * 1 *)", "2027-01-15T00:00:00") == ["2027-01-17 10:00:00"]  # a Sunday
    assert ticks("cron(0 10 ? * SUN *)", "2027-01-15T00:00:00") == ["2027-01-17 10:00:00"]


def test_l_in_day_of_month_is_the_last_day() -> None:
    assert ticks("cron(0 18 L * ? *)", "2027-01-31T18:00:00", 2) == [
        "2027-02-28 18:00:00",
        "2027-03-31 18:00:00",
    ]
    assert ticks("cron(0 18 L 2 ? *)", "2027-03-01T00:00:00") == ["2028-02-29 18:00:00"]  # a leap year


def test_l_in_day_of_week_is_the_last_such_day_of_the_month() -> None:
    assert ticks("cron(0 9 ? * 6L *)", "2027-01-01T00:00:00", 2) == [  # the last Friday
        "2027-01-29 09:00:00",
        "2027-02-26 09:00:00",
    ]
    assert ticks("cron(0 9 ? * L *)", "2027-01-01T00:00:00") == ["2027-01-30 09:00:00"]  # the last Saturday


@pytest.mark.parametrize(
    ("field", "after", "expected"),
    [
        ("15W", "2027-05-01T00:00:00", "2027-05-14 09:00:00"),  # the 15th is a Saturday: Friday the 14th
        ("16W", "2027-05-01T00:00:00", "2027-05-17 09:00:00"),  # the 16th is a Sunday: Monday the 17th
        ("1W", "2027-05-01T00:00:00", "2027-05-03 09:00:00"),  # Saturday the 1st: Monday the 3rd, not April
        ("31W", "2027-10-01T00:00:00", "2027-10-29 09:00:00"),  # Sunday the 31st: Friday the 29th
        ("31W", "2027-02-01T00:00:00", "2027-02-26 09:00:00"),  # beyond February: its last day's weekday
        ("LW", "2027-07-01T00:00:00", "2027-07-30 09:00:00"),  # the 31st is a Saturday: Friday the 30th
        ("12W", "2027-05-01T00:00:00", "2027-05-12 09:00:00"),  # a Wednesday: itself
    ],
)
def test_w_is_the_weekday_nearest_the_day_within_its_month(field: str, after: str, expected: str) -> None:
    assert ticks(f"cron(0 9 {field} * ? *)", after) == [expected]


def test_hash_is_the_nth_such_day_of_the_month() -> None:
    assert ticks("cron(0 9 ? * 2#1 *)", "2027-01-15T00:00:00", 2) == [  # the first Monday
        "2027-02-01 09:00:00",
        "2027-03-01 09:00:00",
    ]
    assert ticks("cron(0 9 ? * FRI#5 *)", "2027-01-01T00:00:00") == [
        "2027-01-29 09:00:00"
    ]  # only in some months


# -- cron, the classic five fields --------------------------------------------------------------------


def test_a_five_field_line() -> None:
    assert ticks("*/5 * * * *", "2027-01-15T08:01:00", 2) == ["2027-01-15 08:05:00", "2027-01-15 08:10:00"]
    assert ticks("0 9 * * 0", "2027-01-15T00:00:00") == ["2027-01-17 09:00:00"]  # 0 is Sunday
    assert ticks("0 9 * * 7", "2027-01-15T00:00:00") == ["2027-01-17 09:00:00"]  # and so is 7
    assert ticks("0 9 * * mon-fri", "2027-01-15T10:00:00") == ["2027-01-18 09:00:00"]


def test_a_five_field_line_with_both_day_fields_matches_either() -> None:
    # the 20th, or any Monday (cron's rule): Monday the 18th comes first, then the 20th
    assert ticks("0 9 20 * 1", "2027-01-15T10:00:00", 2) == ["2027-01-18 09:00:00", "2027-01-20 09:00:00"]


# -- at ----------------------------------------------------------------------------------------------


def test_at_fires_once_at_the_wall_clock_time_of_its_zone() -> None:
    assert ticks("at(2027-06-01T10:00:00)", "2027-01-15T00:00:00", 2, tz="Asia/Tokyo") == [
        "2027-06-01 01:00:00",
        None,
    ]


# -- daylight saving, as EventBridge Scheduler documents it ---------------------------------------------


def test_a_time_skipped_in_spring_is_skipped() -> None:
    # New York moves 02:00 -> 03:00 on Sunday 2027-03-14: 02:30 does not exist that day.
    assert ticks("cron(30 2 * * ? *)", "2027-03-13T12:00:00", 2, tz="America/New_York") == [
        "2027-03-15 06:30:00",  # Monday 02:30 EDT: the Sunday tick was skipped
        "2027-03-16 06:30:00",
    ]


def test_a_time_repeated_in_autumn_fires_once() -> None:
    # New York moves 02:00 -> 01:00 on Sunday 2027-11-07: 01:30 happens twice, and fires once.
    found = ticks("cron(30 1 * * ? *)", "2027-11-06T12:00:00", 2, tz="America/New_York")
    assert found == ["2027-11-07 05:30:00", "2027-11-08 06:30:00"]  # 01:30 EDT, then Monday 01:30 EST
    hourly = ticks("cron(0/30 * * * ? *)", "2027-11-07T05:00:00", 4, tz="America/New_York")
    # 01:00 and 01:30 EST repeat wall-clock times already fired (in EDT): not fired again
    assert hourly == [
        "2027-11-07 05:30:00",
        "2027-11-07 07:00:00",
        "2027-11-07 07:30:00",
        "2027-11-07 08:00:00",
    ]


# -- bad expressions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("", "the forms are"),
        ("every day", "the forms are"),
        ("rate(5 fortnights)", "'fortnights' is not one of seconds, minutes, hours, days"),
        ("rate(0 minutes)", "a rate is from 1 second"),
        ("rate(minutes)", "rate(VALUE UNIT)"),
        ("cron(0 12 * * *)", "six fields"),
        ("cron(0 12 * * MON *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(0 12 ? * ? *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(60 12 ? * * *)", "60 is outside the minutes field's 0-59"),
        ("cron(0 24 ? * * *)", "24 is outside the hours field's 0-23"),
        ("cron(0 12 ? * 8 *)", "8 is outside the day-of-week field's 1-7"),
        ("cron(0 12 ? FOO * *)", "'FOO' is not a value of the month field"),
        ("cron(0 12 ? * * 2200)", "2200 is outside the year field's 1970-2199"),
        ("cron(0/0 12 ? * * *)", "step '0'"),
        ("cron(10-5 12 ? * * *)", "runs backwards"),
        ("cron(0 12 5L * ? *)", "L, LW and NW"),
        ("cron(0 12 ? * 2#6 *)", "the week after # is 1 to 5"),
        ("0 12 L * *", "no L or W"),
        ("0 12 * * 5L", "no L or #"),
        ("0 12 ? * *", "has no ?"),
        ("at(2027-02-30T10:00:00)", "not a date and time of the calendar"),
        ("at(2027-06-01 10:00)", "at(YYYY-MM-DDTHH:MM:SS)"),
        ("at(9999-12-31T23:59:59)", "its year is from 1970 to 2199"),
    ],
)
def test_a_bad_expression_says_what_is_wrong(expression: str, says: str) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="is not a schedule expression") as raised:
        expressions.parse(expression)
    assert says in str(raised.value)
    assert raised.value.parameter == "expression"


def test_an_expression_that_is_not_text_is_refused() -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="expression must be a str such as rate"):
        expressions.parse(5)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", "../etc/passwd", 3])
def test_a_time_zone_is_an_iana_name(zone: object) -> None:
    with pytest.raises(durableq.InvalidParameterValue, match="timezone must be an IANA time zone name"):
        expressions.zone(zone)
