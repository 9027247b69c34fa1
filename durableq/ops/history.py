"""Message history: what happened to each message of a queue that keeps it (opt-in per queue,
like CloudTrail's data events).

Every operation that changes a message writes its events with :func:`record`
inside its own transaction, so an event exists exactly when its change
committed.  A one-statement operation (a standard send, delete, visibility
change) is a two-statement write on such a queue: :func:`atomic`.  Events
are kept for the queue's ``history_retention`` (swept with the messages, see
``retention.py``) and go with the queue when it is deleted.

Event ids are the table's rowids: SQLite numbers a new row one above the highest, so ids only
grow, and are never reused because the newest row is never deleted: the sweep keeps it, and a
deleted queue whose event is the file's newest leaves that one row behind as a placeholder of
queue :data:`NO_QUEUE` (swept once a newer event exists).  AUTOINCREMENT would give the same
guarantee at the price of one more page written by every commit.

Reading.  "After the last id it saw" is a safe place for a reader to resume only if no event with
a lower id can still commit.  On SQLite ids commit in the order they are given (one writer at a
time); on PostgreSQL one-statement writes commit side by side, so id N + 1 may commit before N.
So every reader that resumes after an id (``Broker.message_events``, ``newest_event_id``,
``Queue.events``, the stream source and the incremental export) reads in the engine's
``settled_read()``: a snapshot at or below whose highest event id nothing is still to commit.

Whether a queue keeps history is read from the broker's cached queue row, so
turning it on or off takes effect at once in the process that does it and within
the catalog's revalidation interval (1 s) in other processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext

from .. import limits
from ..engines.base import Connection
from ..types import MessageEvent, datetime_from_ms
from .queue_rows import QueueConfig

SENT = "sent"
RECEIVED = "received"
VISIBILITY_CHANGED = "visibility_changed"
DELETED = "deleted"
#: Left for the dead-letter queue after too many receives (``other_queue``: the dead-letter queue).
MOVED_TO_DEAD_LETTER = "moved_to_dead_letter"
#: Left by a message move task (``other_queue``: where it went).
MOVED_OUT = "moved_out"
#: Arrived by either kind of move (``other_queue``: where it came from).
MOVED_IN = "moved_in"
EXPIRED = "expired"
PURGED = "purged"
#: Every kind of event, in the order a message meets them.
EVENTS = (
    SENT,
    RECEIVED,
    VISIBILITY_CHANGED,
    DELETED,
    MOVED_TO_DEAD_LETTER,
    MOVED_OUT,
    MOVED_IN,
    EXPIRED,
    PURGED,
)

_INSERT = (
    "INSERT INTO durableq_message_events "
    "(queue_id, at, event, message_id, receive_count, other_queue, visible_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
#: Events of the messages of ``:queue_id`` a statement is about to remove or move, written by SQL.
_INSERT_FROM_MESSAGES = """
INSERT INTO durableq_message_events (queue_id, at, event, message_id, receive_count, other_queue)
SELECT queue_id, :now, :event, message_id, receive_count, :other FROM durableq_messages
WHERE {where} ORDER BY id
"""
#: Around an operation on a queue without history: one statement, atomic alone.
_NOTHING: AbstractContextManager[None] = nullcontext()
#: Queue ids start at 1: this one holds the placeholder a deleted queue may leave (see above).
NO_QUEUE = 0
# Never the newest row of the file: it keeps the next id above every id ever given.
_NOT_NEWEST = "event_id < (SELECT max(event_id) FROM durableq_message_events)"
_SWEEP = f"""
DELETE FROM durableq_message_events WHERE event_id IN (
  SELECT event_id FROM durableq_message_events
  WHERE queue_id = ? AND at <= ? AND {_NOT_NEWEST} ORDER BY at LIMIT ?)
"""
_FORGET = f"DELETE FROM durableq_message_events WHERE queue_id = ? AND {_NOT_NEWEST}"
_KEEP_PLACEHOLDER = f"UPDATE durableq_message_events SET queue_id = {NO_QUEUE} WHERE queue_id = ?"
_SWEEP_PLACEHOLDERS = f"DELETE FROM durableq_message_events WHERE queue_id = {NO_QUEUE} AND {_NOT_NEWEST}"
# Events of queues that exist, with their queue's name (a deleted queue's placeholder joins none).
_SELECT = """
SELECT e.event_id, e.at, q.name, e.event, e.message_id, e.receive_count, e.other_queue, e.visible_at
FROM durableq_message_events AS e JOIN durableq_queues AS q ON q.id = e.queue_id
WHERE e.event_id > :after AND e.event_id <= :until"""


def record(
    conn: Connection,
    queue: QueueConfig,
    now: int,
    event: str,
    messages: Iterable[tuple[str, int]],
    other_queue: str | None = None,
    *,
    visible_at: int | None = None,
) -> None:
    """Write one ``event`` per ``(message id, receive count)`` if ``queue`` keeps history
    (inside the caller's transaction); ``visible_at``: when the messages become visible after it
    (epoch ms), for a visibility change."""
    if queue.history:
        rows = [
            (queue.id, now, event, message_id, count, other_queue, visible_at)
            for message_id, count in messages
        ]
        conn.executemany(_INSERT, rows)


def record_sent(conn: Connection, queue: QueueConfig, now: int, sent: Iterable[tuple[str, int]]) -> None:
    """Write a ``sent`` event per ``(message id, visible at)`` if ``queue`` keeps history: when each
    becomes visible (epoch ms; later than ``now`` by its delay), so its wait for a first receive can
    be told apart from its delay."""
    if queue.history:
        conn.executemany(_INSERT, [(queue.id, now, SENT, message_id, 0, None, at) for message_id, at in sent])


def record_where(
    conn: Connection,
    queue: QueueConfig,
    now: int,
    event: str,
    where: str,
    params: dict[str, object],
    other_queue: str | None = None,
) -> None:
    """Write one ``event`` per message row matching ``where`` (SQL over ``messages``, with ``params``),
    before the caller removes or moves them: for sets too large to bring into Python (a purge)."""
    if queue.history:
        sql = _INSERT_FROM_MESSAGES.format(where=where)
        conn.execute(sql, {**params, "now": now, "event": event, "other": other_queue})


def atomic(conn: Connection, queue: QueueConfig) -> AbstractContextManager[None]:
    """Around a one-statement operation: on a queue that keeps history, its statement and its
    events commit as one write (``conn.one_write()``); on others nothing is added."""
    return conn.one_write() if queue.history else _NOTHING


def sweep(conn: Connection, queue: QueueConfig, now: int, batch: int) -> int:
    """Remove (up to ``batch`` of) the queue's events older than its history retention; how many went.
    Also for a queue with history off: what it kept before goes when its time is up."""
    cutoff = now - queue.history_retention * 1000
    swept: int = conn.execute(_SWEEP, (queue.id, cutoff, batch)).rowcount
    conn.execute(_SWEEP_PLACEHOLDERS)  # an index lookup; at most one row per deleted queue
    return swept


def forget(conn: Connection, queue: QueueConfig) -> None:
    """The queue is being deleted: its events go with it (all but a placeholder, see above)."""
    conn.execute(_FORGET, (queue.id,))
    conn.execute(_KEEP_PLACEHOLDER, (queue.id,))


def events(
    conn: Connection,
    *,
    queue: QueueConfig | None = None,
    since: int | None = None,
    after: int = 0,
    until: int = limits.MAX_EVENT_ID,
    limit: int,
) -> list[MessageEvent]:
    """Events oldest first: of ``queue`` (every queue if None), at or after ``since`` (epoch ms),
    with an id in (``after``, ``until``], at most ``limit``."""
    sql, params = _SELECT, {"after": after, "until": until, "limit": limit}
    if queue is not None:  # by durableq_ix_message_events_queue
        sql += " AND e.queue_id = :queue_id"
        params["queue_id"] = queue.id
    if since is not None:
        sql += " AND e.at >= :since"
        params["since"] = since
    rows = conn.execute(f"{sql} ORDER BY e.event_id LIMIT :limit", params)
    return [
        MessageEvent(
            event_id,
            datetime_from_ms(at),
            name,
            event,
            message_id,
            count,
            other,
            None if visible_at is None else datetime_from_ms(visible_at),
        )
        for event_id, at, name, event, message_id, count, other, visible_at in rows
    ]


def newest_event_id(conn: Connection) -> int:
    """The highest event id of the file (0 if it has none): every later event's id is higher (and,
    read in a settled snapshot, no event at or below it is still to commit)."""
    (highest,) = conn.execute("SELECT coalesce(max(event_id), 0) FROM durableq_message_events").fetchone()
    return int(highest)
