"""The time window of a read: ``since``/``until``, checked once and turned into epoch milliseconds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..errors import InvalidParameterValue

MINUTE_MS = 60_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``[since, until)`` in epoch milliseconds; ``None`` leaves that side open."""

    since_ms: int | None = None
    until_ms: int | None = None

    @property
    def first_minute_ms(self) -> int | None:
        """The start of the minute that holds ``since``: counters of that minute overlap the window."""
        return None if self.since_ms is None else self.since_ms - self.since_ms % MINUTE_MS


#: No window: everything in the snapshot.
EVERYTHING = TimeWindow()


def time_window(since: datetime | None, until: datetime | None) -> TimeWindow:
    """The window of two timezone-aware datetimes (either may be None); ``since`` must come first."""
    bounds = [_epoch_ms(name, value) for name, value in (("since", since), ("until", until))]
    since_ms, until_ms = bounds
    if since_ms is not None and until_ms is not None and since_ms >= until_ms:
        raise InvalidParameterValue(f"since ({since}) must be earlier than until ({until})")
    return TimeWindow(since_ms, until_ms)


def _epoch_ms(name: str, value: datetime | None) -> int | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidParameterValue(f"{name} must be a datetime; got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidParameterValue(
            f"{name} must be timezone-aware (for example datetime(2026, 11, 20, tzinfo=UTC)); got {value}"
        )
    # Exact: whole milliseconds since the epoch, rounded down (no float on the way).
    return (value - _EPOCH) // timedelta(milliseconds=1)
