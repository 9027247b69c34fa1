"""Fair queues: the receive order of a standard queue whose messages carry a group id.

SQS's fair queues take a standard queue's ``MessageGroupId`` as the message's tenant, and keep one
noisy tenant from delaying the others.  The rule here, written once:

* A group is **noisy** while it holds more than :data:`~durableq.limits.FAIR_NOISY_SHARE_PERCENT`
  percent of the queue's messages in flight *and* at least
  :data:`~durableq.limits.FAIR_NOISY_MIN_IN_FLIGHT` of them (AWS's concurrency share, counted exactly
  at the claim, over the queue with its virtual queues, as the in-flight limit counts).
* A receive claims the visible messages of the groups that are not noisy first, oldest first among
  them, and fills the slots left with the noisy groups' messages, oldest first: a receive is never
  starved, and when only noisy groups have visible messages they are served as before.
* A message without a group id is its own tenant (as AWS treats it): never noisy, so it is always
  among the first served.

What AWS also does and this does not: a tenant's share of the consumers' processing time (AWS marks a
group noisy past 10 % of it, which needs the time each message was worked on); among several noisy
groups, serving first the one with the fewest in flight (here they share the oldest-first order);
and a noisy tenant's status lasting until its backlog drains or it stops sending for 5 minutes (here
a group is noisy exactly while its in-flight share says so).

A queue that was never sent a group id pays nothing: its queue row's ``grouped`` flag (set by
:func:`mark` with its first such message, never cleared) is false, and its receive is the one claim
statement it always was.  On a grouped queue a receive is one claim statement while the quiet groups
fill it, two when the noisy groups must fill the rest.  What it reads more: the queue's messages in
flight, to find the noisy groups (their range of the visible index and each one's group id), and,
while a group is noisy, the visible messages in order past that group's ones, so with a noisy backlog
and few quiet messages it reads that backlog on each receive (docs/benchmarks.md, W20).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import limits
from ..engines.base import Connection
from ..engines.dialect import Dialect, for_each_dialect
from . import queue_rows
from .queue_rows import Catalog, QueueConfig
from .states import in_flight_sql

#: A claimed row of ``message_rows.COLUMNS``.
Row = Sequence[Any]

_IN_FLIGHT = f"FROM durableq_messages {{}} WHERE queue_id = :queue_id AND {in_flight_sql()}"


def _noisy(d: Dialect) -> str:
    """The groups of ``:queue_id`` that are noisy at ``:now``: read from the range of in-flight rows of
    durableq_ix_messages_visible (never the whole queue through the group index)."""
    rows = _IN_FLIGHT.format(d.indexed_by("durableq_ix_messages_visible"))
    return f"""SELECT group_id {rows} AND group_id IS NOT NULL
    GROUP BY group_id
    HAVING count(*) >= {limits.FAIR_NOISY_MIN_IN_FLIGHT}
      AND count(*) * 100 > {limits.FAIR_NOISY_SHARE_PERCENT} * (SELECT count(*) {rows})"""


#: The condition, added to a claim's row picker, that takes only messages of groups that are not
#: noisy (and those without a group).  The noisy groups are found once per statement.
QUIET_SQL = for_each_dialect(lambda d: f"(group_id IS NULL OR group_id NOT IN ({_noisy(d)}))")
_MARK = "UPDATE durableq_queues SET grouped = TRUE WHERE id = ? AND NOT grouped"


def claim(
    conn: Connection, queue: QueueConfig, params: Mapping[str, Any], head: str, quiet: str
) -> list[Row]:
    """Claim up to ``params["limit"]`` messages of standard queue ``queue`` in the fair order: ``head``
    is the claim statement (oldest first), ``quiet`` the same with :data:`QUIET_SQL` added.  Returns
    the rows in the order they are served: the quiet groups' oldest first, then the noisy groups'."""
    if not queue.grouped:  # never sent a group id: the one claim, as ever
        return _oldest_first(conn.execute(head, params).fetchall())
    rows = _oldest_first(conn.execute(quiet, params).fetchall())
    if len(rows) < params["limit"]:  # the rest from the noisy groups (or nothing is left)
        rest = conn.execute(head, {**params, "limit": params["limit"] - len(rows)}).fetchall()
        rows += _oldest_first(rest)
    return rows


def _oldest_first(rows: list[Row]) -> list[Row]:
    """A claim's rows, oldest first (RETURNING order is unspecified): by enqueued_at, then row id."""
    if len(rows) > 1:
        rows.sort(key=lambda row: (row[6], row[0]))
    return rows


def mark(conn: Connection, queue: QueueConfig, catalog: Catalog | None = None) -> None:
    """Standard queue ``queue`` takes a message with a group id: from now on its receives are fair.
    Call only where ``queue.grouped`` is false (the row as the caller read it), inside the write;
    ``catalog``: the caller's, whose cached row is dropped at once (the others' reload it when they
    next check the catalog's counter, within ``Catalog.REVALIDATE_EVERY``)."""
    with conn.one_write():
        if conn.execute(_MARK, (queue.id,)).rowcount:
            queue_rows.changed(conn)
    if catalog is not None:
        catalog.forget(queue.name)
