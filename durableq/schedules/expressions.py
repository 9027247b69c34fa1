"""Schedule expressions: parsing, and the next tick after a moment (pure functions of their inputs).

The forms are EventBridge Scheduler's, so that an SQS user needs nothing new, plus two of durableq's:

- ``rate(VALUE UNIT)``: every VALUE minutes, hours or days (``minute``/``minutes`` ...), counted from
  the schedule's anchor (its ``start``, else its creation); durableq adds ``seconds``, down to one.
  A day is 24 hours of elapsed time, whatever a daylight-saving change does to the wall clock (as
  EventBridge documents).
- ``cron(MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK YEAR)``: EventBridge's six fields, read on the wall
  clock of the schedule's time zone, with ``*``, ``,``, ``-``, ``/``, ``?`` (one of the two day
  fields must be ``?``), ``L`` (last day of the month; ``6L`` in day-of-week: its last Friday), ``W``
  (``15W``: the weekday nearest the 15th, within the month; ``LW``: the last weekday), ``#``
  (``2#1``: the first Monday); day-of-week 1-7 is SUN-SAT.
- ``at(YYYY-MM-DDTHH:MM:SS)``: once, at that wall-clock time of the time zone.
- a classic five-field cron line, ``MIN HOUR DAY-OF-MONTH MONTH DAY-OF-WEEK`` (day-of-week 0-7, 0 and 7
  Sunday; when both day fields are restricted, a day matching either one matches, as cron does).

Daylight saving, as EventBridge Scheduler documents it: a wall-clock time that does not exist (the hour
skipped in spring) is skipped, a cron tick or an at(); one that happens twice (the hour repeated in
autumn) fires once, at its first occurrence.

Why not croniter: it reads a sixth field as seconds (EventBridge's is the year), numbers day-of-week
from 0 = Sunday and has no ``W``, so this small parser is durableq's own, tested rule by rule.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .. import limits
from ..errors import InvalidParameterValue, Reason

_RATE = re.compile(r"rate\(\s*(\d+)\s+([a-z]+)\s*\)", re.IGNORECASE)
_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")
_CRON = re.compile(r"cron\((.*)\)", re.DOTALL)
_UNITS = {"second": 1, "minute": 60, "hour": 3_600, "day": 86_400}
_MONTHS = {name.upper(): n for n, name in enumerate(calendar.month_abbr) if name}
#: Day-of-week names, as EventBridge numbers them (1 = SUN); a five-field line numbers from 0.
_DAYS = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), start=1)}
FORMS = "rate(5 minutes), cron(0 12 ? * MON-FRI *), at(2026-12-01T10:00:00) or a five-field cron line"


def _bad(expression: object, what: str) -> InvalidParameterValue:
    return InvalidParameterValue(
        template="{parameter} {value!r} is not a schedule expression: "
        + what.replace("{", "{{").replace("}", "}}"),
        parameter="expression",
        value=expression,
        reason=Reason.FORM,
    )


def zone(name: object) -> ZoneInfo:
    """The IANA time zone called ``name`` (``UTC``, ``Europe/Paris``), else InvalidParameterValue."""
    if isinstance(name, str) and name and not name.startswith(("/", ".")):
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    raise InvalidParameterValue(
        template="{parameter} must be an IANA time zone name such as UTC or Europe/Paris; got {value!r}",
        parameter="timezone",
        value=name,
        reason=Reason.FORM,
    )


class Expression:
    """A parsed expression: :meth:`following` is its first tick after a moment."""

    text: str

    def following(self, after: int, tz: ZoneInfo, anchor: int) -> int | None:
        """The first tick strictly after ``after`` (epoch ms), None if there is none; ``anchor`` (epoch
        ms) is where a rate counts from."""
        raise NotImplementedError

    def latest(self, tick: int, until: int, tz: ZoneInfo, anchor: int) -> int:
        """The last tick at or before ``until`` from ``tick`` on, sought back in doubling steps."""
        step = 1000
        while True:
            probe = max(tick, until - step)
            later = self.following(probe, tz, anchor)
            if later is not None and later <= until:  # the latest is in (probe, until]: a few ticks
                while (after := self.following(later, tz, anchor)) is not None and after <= until:
                    later = after
                return later
            if probe == tick:
                return tick
            step *= 2


@dataclass(frozen=True)
class Rate(Expression):
    text: str
    seconds: int

    def following(self, after: int, tz: ZoneInfo, anchor: int) -> int | None:
        step = self.seconds * 1000
        if after < anchor:
            return anchor
        return anchor + ((after - anchor) // step + 1) * step

    def latest(self, tick: int, until: int, tz: ZoneInfo, anchor: int) -> int:
        step = self.seconds * 1000
        return max(tick, anchor + (until - anchor) // step * step) if until >= anchor else tick


@dataclass(frozen=True)
class At(Expression):
    text: str
    wall: datetime  # naive: the wall-clock time of the schedule's zone

    def following(self, after: int, tz: ZoneInfo, anchor: int) -> int | None:
        moment = wall_moment(self.wall, tz)
        return moment if moment is not None and moment > after else None


@dataclass(frozen=True)
class Cron(Expression):
    """A cron expression (six EventBridge fields, or a classic five-field line)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int]
    days_of_month: tuple[str, ...]  # atoms: "5", "L", "LW", "15W"; () = any
    days_of_week: tuple[str, ...]  # atoms as EventBridge numbers them: "2", "6L", "2#1"; () = any
    either: bool  # five-field: a day matching either field matches

    def following(self, after: int, tz: ZoneInfo, anchor: int) -> int | None:
        local = datetime.fromtimestamp(after // 1000, tz).replace(tzinfo=None, second=0, microsecond=0)
        for wall in self._walls(local):
            ms = wall_moment(wall, tz)
            if ms is not None and ms > after:
                return ms
        return None

    def _walls(self, start: datetime) -> Iterator[datetime]:
        """Matching wall-clock minutes at or after ``start`` (naive), in order."""
        for year in sorted(y for y in self.years if y >= start.year):
            for month in sorted(self.months):
                if (year, month) < (start.year, start.month):
                    continue
                for day in range(1, calendar.monthrange(year, month)[1] + 1):
                    today = date(year, month, day)
                    if today < start.date() or not self._day(today):
                        continue
                    for hour in sorted(self.hours):
                        for minute in sorted(self.minutes):
                            wall = datetime(year, month, day, hour, minute)
                            if wall >= start:
                                yield wall

    def _day(self, day: date) -> bool:
        by_month = any(_month_day(atom, day) for atom in self.days_of_month) if self.days_of_month else None
        by_week = any(_week_day(atom, day) for atom in self.days_of_week) if self.days_of_week else None
        if by_month is None or by_week is None:
            return (by_month is None or by_month) and (by_week is None or by_week)
        return (by_month or by_week) if self.either else (by_month and by_week)


def _epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp()) * 1000


def _month_day(atom: str, day: date) -> bool:
    last = calendar.monthrange(day.year, day.month)[1]
    if atom == "L":
        return day.day == last
    if atom.endswith("W"):
        target = last if atom == "LW" else min(int(atom[:-1]), last)
        return day.day == _nearest_weekday(day.replace(day=target))
    return day.day == int(atom)


def _nearest_weekday(target: date) -> int:
    """The weekday (Mon-Fri) nearest ``target``, never in another month (Quartz's and EventBridge's W)."""
    last = calendar.monthrange(target.year, target.month)[1]
    weekday = target.weekday()  # Monday = 0
    if weekday == 5:  # Saturday: the Friday before, or the Monday after on the 1st
        return target.day - 1 if target.day > 1 else target.day + 2
    if weekday == 6:  # Sunday: the Monday after, or the Friday before on the last day
        return target.day + 1 if target.day < last else target.day - 2
    return target.day


def _week_day(atom: str, day: date) -> bool:
    number = day.isoweekday() % 7 + 1  # EventBridge: 1 = Sunday
    if "#" in atom:
        wanted, nth = (int(part) for part in atom.split("#"))
        return number == wanted and (day.day - 1) // 7 + 1 == nth
    if atom.endswith("L"):
        wanted = int(atom[:-1]) if atom != "L" else 7  # a bare L: the last day of the week, Saturday
        return number == wanted and day.day + 7 > calendar.monthrange(day.year, day.month)[1]
    return number == int(atom)


# -- parsing ---------------------------------------------------------------------------------------


def parse(expression: object) -> Expression:
    """The expression ``expression`` is, else InvalidParameterValue saying what is wrong and what the
    forms are (see the module)."""
    if not isinstance(expression, str):
        raise InvalidParameterValue(
            template="{parameter} must be a str such as " + FORMS + "; got {value!r}",
            parameter="expression",
            value=expression,
            reason=Reason.TYPE,
        )
    text = expression.strip()
    if text.startswith("rate("):
        return _rate(expression, text)
    if text.startswith("at("):
        return _at(expression, text)
    if text.startswith("cron("):
        match = _CRON.fullmatch(text)
        fields = match.group(1).split() if match else []
        if len(fields) != 6:
            raise _bad(
                expression,
                "cron(...) takes six fields (minutes hours day-of-month month "
                "day-of-week year), e.g. cron(0 12 ? * MON-FRI *)",
            )
        return _cron(expression, text, fields, five=False)
    fields = text.split()
    if len(fields) == 5 and "(" not in text:
        return _cron(expression, text, fields, five=True)
    raise _bad(expression, f"the forms are {FORMS}")


def _rate(expression: str, text: str) -> Rate:
    match = _RATE.fullmatch(text)
    if match is None:
        raise _bad(expression, "a rate is rate(VALUE UNIT), e.g. rate(5 minutes) or rate(1 hour)")
    value, unit = int(match.group(1)), match.group(2).lower()
    per = _UNITS.get(unit.removesuffix("s"))
    if per is None:
        raise _bad(expression, f"the unit {unit!r} is not one of seconds, minutes, hours, days")
    seconds = value * per
    if not limits.MIN_RATE_SECONDS <= seconds <= limits.MAX_RATE_SECONDS:
        raise _bad(
            expression,
            f"a rate is from {limits.MIN_RATE_SECONDS} second to {limits.MAX_RATE_SECONDS:,} seconds",
        )
    return Rate(f"rate({value} {unit})", seconds)


def _at(expression: str, text: str) -> At:
    match = _AT.fullmatch(text)
    if match is None:
        raise _bad(expression, "a one-time schedule is at(YYYY-MM-DDTHH:MM:SS), e.g. at(2026-12-01T10:00:00)")
    try:
        wall = datetime.fromisoformat(match.group(1))
    except ValueError:
        raise _bad(expression, f"{match.group(1)} is not a date and time of the calendar") from None
    if not limits.MIN_CRON_YEAR <= wall.year <= limits.MAX_CRON_YEAR:
        raise _bad(expression, f"its year is from {limits.MIN_CRON_YEAR} to {limits.MAX_CRON_YEAR}")
    return At(text, wall)


class _Field:
    """One cron field's rules: its name, its range, its names, and the special atoms it takes."""

    def __init__(self, name: str, low: int, high: int, names: dict[str, int] | None = None) -> None:
        self.name, self.low, self.high, self.names = name, low, high, names or {}

    def number(self, expression: str, token: str) -> int:
        value = self.names.get(token.upper())
        if value is None:
            if not token.isdigit():
                raise _bad(
                    expression,
                    f"{token!r} is not a value of the {self.name} field "
                    f"({self.low}-{self.high}{' or a name' if self.names else ''})",
                )
            value = int(token)
        if not self.low <= value <= self.high:
            raise _bad(expression, f"{value} is outside the {self.name} field's {self.low}-{self.high}")
        return value

    def values(self, expression: str, text: str) -> frozenset[int]:
        """A field of ``*``, values, ranges and steps, as the set of values it matches."""
        found: set[int] = set()
        for part in text.split(","):
            base, slash, step_text = part.partition("/")
            if base == "":
                raise _bad(expression, f"an empty item in the {self.name} field")
            if base == "*":
                low, high = self.low, self.high
            elif "-" in base:
                first, _, last = base.partition("-")
                low, high = self.number(expression, first), self.number(expression, last)
                if low > high:
                    raise _bad(expression, f"the range {base} of the {self.name} field runs backwards")
            else:
                low = self.number(expression, base)
                high = self.high if slash else low
            step = 1
            if slash:
                if not step_text.isdigit() or int(step_text) == 0:
                    raise _bad(
                        expression,
                        f"the step {step_text!r} of the {self.name} field is not a positive whole number",
                    )
                step = int(step_text)
            found.update(range(low, high + 1, step))
        return frozenset(found)


_MINUTE = _Field("minutes", 0, 59)
_HOUR = _Field("hours", 0, 23)
_DAY_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, _MONTHS)
_YEAR = _Field("year", limits.MIN_CRON_YEAR, limits.MAX_CRON_YEAR)
_WEEKDAY = _Field("day-of-week", 1, 7, _DAYS)
_CLASSIC_WEEKDAY = _Field("day-of-week", 0, 7, {name: n - 1 for name, n in _DAYS.items()})
_ALL_YEARS = "*"


def _cron(expression: str, text: str, fields: list[str], *, five: bool) -> Cron:
    minute, hour, dom, month, dow = fields[:5]
    year = _ALL_YEARS if five else fields[5]
    if not five and (dom == "?") == (dow == "?"):
        raise _bad(
            expression,
            "exactly one of day-of-month and day-of-week must be ? (the other says "
            "which days), e.g. cron(0 12 ? * MON-FRI *) or cron(0 12 1 * ? *)",
        )
    if five and "?" in (dom, dow):
        raise _bad(expression, "a five-field cron line has no ?; use * (or write cron(...) with six fields)")
    return Cron(
        text,
        _MINUTE.values(expression, minute),
        _HOUR.values(expression, hour),
        _MONTH.values(expression, month),
        _YEAR.values(expression, year),
        () if dom in ("*", "?") else _month_days(expression, dom, five),
        () if dow in ("*", "?") else _week_days(expression, dow, five),
        either=five and dom != "*" and dow != "*",
    )


def _month_days(expression: str, text: str, five: bool) -> tuple[str, ...]:
    atoms: list[str] = []
    for part in text.split(","):
        if not five and part in ("L", "LW"):
            atoms.append(part)
        elif not five and part.endswith("W"):
            atoms.append(f"{_DAY_OF_MONTH.number(expression, part[:-1])}W")
        elif "L" in part.upper() or "W" in part.upper():
            raise _bad(
                expression,
                f"{part!r} in the day-of-month field: L, LW and NW (e.g. 15W) stand "
                "alone" + ("" if not five else "; a five-field cron line has no L or W"),
            )
        else:
            atoms.extend(str(day) for day in sorted(_DAY_OF_MONTH.values(expression, part)))
    return tuple(atoms)


def _week_days(expression: str, text: str, five: bool) -> tuple[str, ...]:
    atoms: list[str] = []
    for part in text.split(","):
        if not five and "#" in part:
            day, _, nth = part.partition("#")
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                raise _bad(expression, f"{part!r}: the week after # is 1 to 5")
            atoms.append(f"{_WEEKDAY.number(expression, day)}#{nth}")
        elif not five and part.upper().endswith("L"):
            atoms.append("L" if part.upper() == "L" else f"{_WEEKDAY.number(expression, part[:-1])}L")
        elif five:
            if "#" in part or part.upper().endswith("L"):
                raise _bad(
                    expression, "a five-field cron line has no L or #; write cron(...) with six fields"
                )
            # classic numbering (0 and 7 are Sunday) into EventBridge's (1 = Sunday)
            atoms.extend(str(day % 7 + 1) for day in sorted(_CLASSIC_WEEKDAY.values(expression, part)))
        else:
            atoms.extend(str(day) for day in sorted(_WEEKDAY.values(expression, part)))
    return tuple(dict.fromkeys(atoms))


def wall_moment(wall: datetime, tz: ZoneInfo) -> int | None:
    """Naive ``wall`` in ``tz`` (epoch ms): a repeated time's first (fold=0); None for a skipped one."""
    moment = wall.replace(tzinfo=tz)
    exists = moment.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall
    return _epoch_ms(moment) if exists else None


def iso(ms: int) -> str:
    """An epoch-millisecond tick as ISO 8601 in UTC, to the second (``2026-12-01T10:00:00Z``)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
