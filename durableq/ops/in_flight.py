"""A FIFO receive's in-flight room, without counting the messages in flight on every receive.

The in-flight limit is exact on a FIFO queue: its receive runs in the write transaction and takes
only as many as fit (``stats.in_flight_room``).  Once the file's row ids span more than the limit
(20,000), the room is found by counting the queue's messages in flight: about 0.1 ms per 1,000 of
them, on every receive (issue 30: half of a FIFO receive with 1,000 in flight).

So a connection remembers, per queue, an upper bound of that count: the count it last made, plus
every message it has put in flight since.  While the bound leaves room for a whole receive, the
receive takes it without counting.  The bound holds only while nothing else can have put a message
of the queue in flight:

* no other connection, of any process, has committed since (the engine's ``commits_elsewhere``:
  SQLite's ``PRAGMA data_version``; on an engine without one nothing is remembered);
* this connection changed no visibility of the queue's messages (which can put a message whose
  timeout ended back in flight): :func:`forget` drops the bound;
* the clock did not step back (a message that became visible at the count would be in flight
  again);
* the count was made before the transaction wrote anything, on the connection's own transaction
  (:func:`room` is asked first thing in a receive's own write, never inside a group commit or an
  application's transaction), so a rollback can only leave the bound too high, never too low.

Messages leaving flight (deleted, visible again, expired) leave the bound too high: it is an upper
bound, recounted when it stops proving room.
"""

from __future__ import annotations

import weakref

from ..engines.base import Connection
from .queue_rows import QueueConfig
from .stats import in_flight_count, in_flight_room

#: Per connection: queue id -> [the value of ``commits_elsewhere``, the bound, the clock (ms) of the
#: count].  Weak: a closed connection's bounds go with it.
_bounds: weakref.WeakKeyDictionary[Connection, dict[int, list[int]]] = weakref.WeakKeyDictionary()
#: How many rows the table can hold at most: the span of its row ids (NULL when it is empty).
_SPAN = "SELECT (SELECT max(id) FROM durableq_messages) - (SELECT min(id) FROM durableq_messages) + 1"


def mark(conn: Connection) -> int | None:
    """The value of the engine's ``commits_elsewhere`` on ``conn`` now (None on an engine without one)."""
    mark_sql = conn.dialect.commits_elsewhere
    return None if mark_sql is None else int(conn.execute(mark_sql).fetchone()[0])


def room(
    conn: Connection, queue: QueueConfig, now: int, limit: int, *, remember: bool, known: int | None = None
) -> int:
    """How many more messages (at most ``limit``) may go in flight on ``queue`` now: exact, in the write
    transaction.  ``remember``: this is the connection's own transaction and nothing was written in it
    yet (see the module); else the messages in flight are counted, as ever.  ``known``: :func:`mark`,
    if the caller read it in this transaction."""
    mark_now = None if not remember else known if known is not None else mark(conn)
    if mark_now is None:
        return in_flight_room(conn, queue, now, limit)
    cap = queue.in_flight_limit
    bounds = _bounds.setdefault(conn, {})
    bound = bounds.get(queue.id)
    if bound is not None and bound[0] == mark_now and now >= bound[2] and bound[1] + limit <= cap:
        return limit
    # The bound of stats.IN_FLIGHT_ROOM_SQL first: no queue holds more messages than the span of row
    # ids in the table (two index lookups); a count where that is not enough.
    (span,) = conn.execute(_SPAN).fetchone()
    count = span if span is None or span + limit <= cap else in_flight_count(conn, queue, now)
    bounds[queue.id] = [mark_now, count or 0, now]
    return max(0, min(limit, cap - (count or 0)))


def claimed(conn: Connection, queue: QueueConfig, count: int) -> None:
    """``count`` messages of ``queue`` went in flight on ``conn``: its bound grows by as many."""
    bound = _known(conn).get(queue.id)
    if bound is not None:
        bound[1] += count


def forget(conn: Connection, queue: QueueConfig) -> None:
    """``conn`` changed the visibility of messages of ``queue``: its bound no longer holds."""
    _known(conn).pop(queue.id, None)


def _known(conn: Connection) -> dict[int, list[int]]:
    """The bounds ``conn`` holds: none on an engine without ``commits_elsewhere``, nor on a connection
    that cannot be weakly referred to (an application's own, in ``Broker.transaction``)."""
    if conn.dialect.commits_elsewhere is None:
        return {}
    try:
        return _bounds.get(conn, {})
    except TypeError:
        return {}
