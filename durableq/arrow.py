"""The message-history reports as Arrow tables, without Spark or a JVM.

    import durableq
    from durableq import arrow

    with durableq.open("queue.db") as broker:
        table = arrow.report(broker, "wait")        # a pyarrow.Table
    table.to_pandas()                               # or polars.from_arrow(table), duckdb.sql("FROM table")

The reports of :mod:`durableq.analytics.lifetimes` (``latency``, ``processing``,
``retries``, ``wait``), with the same rules, columns and numbers, computed in
plain Python over the events the library reads (``Broker.message_events``):
for a user without Spark, and for small and medium histories, where Spark's
start-up costs more than the work.  Percentiles: by default the value of the
data at rank ``ceil(p * n)``, which is what Spark's ``percentile_approx``
answers while a queue has a few thousand values (with more, Spark's is within
``n / 10,000`` ranks of it); with ``exact``, interpolated as Spark's
``percentile``.  Needs pyarrow (``pip install 'durableq[arrow]'``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from . import limits
from .broker import Broker
from .errors import InvalidParameterValue
from .ops import history
from .types import MessageEvent

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError as exc:  # say how to get it, as the Spark extra does
    raise ImportError(f"durableq.arrow needs pyarrow: pip install 'durableq[arrow]' ({exc})") from exc

__all__ = ["EVENTS_SCHEMA", "REPORTS", "events_table", "read_events", "report"]

_TIME = pa.timestamp("ms", tz="UTC")
#: The columns of :func:`read_events`: those of Spark's ``QueueAnalytics.events()``.
EVENTS_SCHEMA = pa.schema(
    [
        ("event_id", pa.int64()),
        ("at", _TIME),
        ("queue", pa.string()),
        ("event", pa.string()),
        ("message_id", pa.string()),
        ("receive_count", pa.int64()),
        ("other_queue", pa.string()),
        ("visible_at", _TIME),
    ]
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_PERCENTILES = limits.REPORT_PERCENTILES


def read_events(broker: Broker, *, since: datetime | None = None, until: datetime | None = None) -> pa.Table:
    """Every message event of ``broker`` with ``at`` in ``[since, until)`` (either side open), by id."""
    low, high = _ms_or_none("since", since), _ms_or_none("until", until)
    if low is not None and high is not None and low >= high:
        raise InvalidParameterValue(f"since ({since}) must be earlier than until ({until})")
    chosen = (
        e
        for e in _all_events(broker)
        if (low is None or _ms(e.at) >= low) and (high is None or _ms(e.at) < high)
    )
    return events_table(chosen)


def events_table(events: Iterable[MessageEvent]) -> pa.Table:
    """``events`` (as ``Broker.message_events`` gives them) as a table of :data:`EVENTS_SCHEMA`."""
    columns: list[list[Any]] = [[] for _ in EVENTS_SCHEMA]
    for e in events:
        row = (e.event_id, e.at, e.queue, e.event, e.message_id, e.receive_count, e.other_queue, e.visible_at)
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, EVENTS_SCHEMA, strict=True)], schema=EVENTS_SCHEMA
    )


def report(
    broker: Broker,
    name: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    exact: bool = False,
    completed_in_window: bool = False,
) -> pa.Table:
    """Report ``name`` (a key of :data:`REPORTS`) over the events of ``broker`` in ``[since, until)``.

    ``exact`` and ``completed_in_window``: as ``QueueAnalytics.report`` (the latter counts the
    messages that completed in the window, whenever they were sent).
    """
    if name not in REPORTS:
        raise InvalidParameterValue(f"unknown report {name!r}; choose one of {', '.join(REPORTS)}")
    completed_since = _ms_or_none("since", since) if completed_in_window else None
    events = read_events(broker, since=None if completed_in_window else since, until=until)
    return REPORTS[name](events, exact=exact, completed_since=completed_since)


# -- the reports: each the same rules as its namesake in durableq/analytics/lifetimes.py -------------


def latency(events: pa.Table, *, exact: bool = False, completed_since: int | None = None) -> pa.Table:
    """Seconds from the send to the delete, per queue (``lifetimes.latency``)."""
    return _between(events, history.SENT, history.DELETED, exact, completed_since)


def processing(events: pa.Table, *, exact: bool = False, completed_since: int | None = None) -> pa.Table:
    """Seconds from the last receive to the delete, per queue (``lifetimes.processing``)."""
    return _between(events, history.RECEIVED, history.DELETED, exact, completed_since)


def wait(events: pa.Table, *, exact: bool = False, completed_since: int | None = None) -> pa.Table:
    """Seconds from the send, and from visible, to the first receive, per queue (``lifetimes.wait``)."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_message = _per_message(
        events,
        sent=(history.SENT, "at", "max"),
        visible=(history.SENT, "visible_at", "max"),
        received=(history.RECEIVED, "at", "min"),
    )
    for queue, sent, visible, received in per_message:
        if sent is None or received is None or not _after(received, completed_since):
            continue
        values[(queue, "sent")].append((received - sent) / 1000.0)
        if visible is not None:
            values[(queue, "visible")].append((received - visible) / 1000.0)
    rows = [
        {"queue": queue, "measured_from": since, **_summary(values[(queue, since)], exact)}
        for queue, since in sorted(values)
    ]
    keys = [("queue", pa.string()), ("measured_from", pa.string()), ("messages", pa.int64())]
    return _table(rows, keys, pa.float64(), exact)


def _between(events: pa.Table, start: str, end: str, exact: bool, completed_since: int | None) -> pa.Table:
    """Per queue, the seconds from a message's last ``start`` to its last ``end`` event."""
    values: dict[str, list[float]] = defaultdict(list)
    per_message = _per_message(events, start=(start, "at", "max"), end=(end, "at", "max"))
    for queue, began, ended in per_message:
        if began is not None and ended is not None and _after(ended, completed_since):
            values[queue].append((ended - began) / 1000.0)
    return _distribution(values, exact=exact, kind=pa.float64())


def retries(events: pa.Table, *, exact: bool = False, completed_since: int | None = None) -> pa.Table:
    """Receives in the queue before the delete or dead letter, per queue (``lifetimes.retries``): the
    count a message brought from another queue (a dead letter's) is not counted."""
    arrived: dict[tuple[str, str], int] = {}
    ended: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for _, at, queue, event, message_id, count in _rows(
        events, "event_id", "at", "queue", "event", "message_id", "receive_count"
    ):
        if event in (history.SENT, history.MOVED_IN):
            arrived[(queue, message_id)] = count
        elif event in (history.DELETED, history.MOVED_TO_DEAD_LETTER):
            start = arrived.get((queue, message_id))
            if start is not None and _after(at, completed_since):
                ended[queue].append((event, count - start))
    rows = []
    for queue in sorted(ended):
        counts = {
            "deleted_first_receive": sum(e == history.DELETED and r <= 1 for e, r in ended[queue]),
            "deleted_after_retries": sum(e == history.DELETED and r > 1 for e, r in ended[queue]),
            "dead_lettered": sum(e != history.DELETED for e, _ in ended[queue]),
        }
        rows.append({"queue": queue, **counts, **_summary([r for _, r in ended[queue]], exact)})
    keys = [("queue", pa.string()), ("messages", pa.int64()), *((name, pa.int64()) for name in counts)]
    return _table(rows, keys, pa.int64(), exact)


#: The reports by name, as ``durableq.analytics.REPORT_NAMES`` names them.
REPORTS: dict[str, Callable[..., pa.Table]] = {
    "latency": latency,
    "processing": processing,
    "retries": retries,
    "wait": wait,
}


# -- helpers ---------------------------------------------------------------------------------------


def _all_events(broker: Broker) -> Iterator[MessageEvent]:
    until, after = broker.newest_event_id(), 0
    while after < until:
        page = broker.message_events(after=after, until=until, limit=limits.MAX_EVENT_LIMIT)
        if not page:
            return
        yield from page
        after = page[-1].event_id


def _ms(at: datetime) -> int:
    return (at - _EPOCH) // _MS


def _ms_or_none(name: str, value: datetime | None) -> int | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidParameterValue(f"{name} must be a timezone-aware datetime; got {value!r}")
    return _ms(value)


def _rows(events: pa.Table, *names: str) -> Iterator[tuple[Any, ...]]:
    """The columns ``names`` of ``events``, row by row, in event-id order; times as epoch ms."""
    ordered = events.sort_by("event_id")
    columns = [ordered.column(n) for n in names]
    columns = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in columns]
    return zip(*(c.to_pylist() for c in columns), strict=True)


def _per_message(events: pa.Table, **wanted: tuple[str, str, str]) -> Iterator[tuple[Any, ...]]:
    """Per (queue, message id): its queue, then for each ``name=(event, column, "max" or "min")`` that
    aggregate of ``column`` (as epoch ms) over the message's ``event`` events (None without one)."""
    kinds = sorted({event for event, _, _ in wanted.values()})
    kept = events.filter(pc.is_in(events["event"], value_set=pa.array(kinds, pa.string())))
    chosen = kept.select(["queue", "message_id"])
    for name, (event, column, _) in wanted.items():
        values = kept[column].cast(pa.int64())
        chosen = chosen.append_column(name, pc.if_else(pc.equal(kept["event"], event), values, None))
    grouped = chosen.group_by(["queue", "message_id"]).aggregate(
        [(name, how) for name, (_, _, how) in wanted.items()]
    )
    columns = [grouped["queue"], *(grouped[f"{name}_{how}"] for name, (_, _, how) in wanted.items())]
    return zip(*(c.to_pylist() for c in columns), strict=True)


def _after(ms: int, since: int | None) -> bool:
    return since is None or ms >= since


def _rank(ordered: Sequence[Any], fraction: float) -> Any:
    """Spark's ``percentile_approx`` when it is exact: the value at rank ceil(fraction * n)."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _interpolated(ordered: Sequence[Any], fraction: float) -> float:
    """Spark's ``percentile``: between the two nearest ranks, as Spark rounds it (the same doubles)."""
    position = (len(ordered) - 1) * fraction
    lower, higher = math.floor(position), math.ceil(position)
    low, high = float(ordered[lower]), float(ordered[higher])
    return low + (position - lower) * (high - low)


def _summary(values: list[Any], exact: bool) -> dict[str, Any]:
    ordered = sorted(values)
    pick = _interpolated if exact else _rank
    return {
        "messages": len(ordered),
        **{f"p{round(p * 100)}": pick(ordered, p) for p in _PERCENTILES},
        "max": ordered[-1],
    }


def _distribution(values: dict[str, list[float]], *, exact: bool, kind: pa.DataType) -> pa.Table:
    rows = [{"queue": queue, **_summary(values[queue], exact)} for queue in sorted(values)]
    return _table(rows, [("queue", pa.string()), ("messages", pa.int64())], kind, exact)


def _table(rows: list[dict[str, Any]], keys: list[tuple[str, Any]], kind: Any, exact: bool) -> pa.Table:
    """The rows as a table: ``keys``, then the percentiles (double when exact, else ``kind``), ``max``
    (the column types of Spark's report)."""
    percentiles = [(f"p{round(p * 100)}", pa.float64() if exact else kind) for p in _PERCENTILES]
    return pa.Table.from_pylist(rows, schema=pa.schema([*keys, *percentiles, ("max", kind)]))
