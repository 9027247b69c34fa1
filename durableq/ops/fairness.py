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
:func:`mark` in the same commit as its first such message, never cleared) is false, and its receive is
the one claim statement it always was.  The flag bumps no catalog counter (so setting it locks nothing
but the queue row, and passes over a row another transaction holds); the catalog's check reads it
beside the counter, so another broker's cached row learns it within ``Catalog.REVALIDATE_EVERY``, and
at once on the paths that ask for a fresh row.

A grouped queue's receive runs in a write transaction of its own: it finds the noisy groups
(:data:`NOISY_SQL`), then claims the quiet groups' messages and, if they do not fill it, the noisy
groups': two disjoint claims (the noisy groups as found once), so a message is never taken twice, even
with a visibility timeout of 0, and a receive that fails takes nothing.

What a grouped queue's receive reads more (the strict xfails of tests/test_adversary34.py hold it):
the queue's messages in flight, to find the noisy groups, and, while a group is noisy, the visible
messages in order past that group's ones, so with a noisy backlog and few quiet messages it reads that
backlog on each receive (docs/benchmarks.md, W20), inside the write lock.  Per-group counts, as FIFO's
``durableq_fifo_groups`` keeps them, would bound both: not built yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import limits
from ..engines.base import Connection
from ..engines.dialect import Dialect, encode_ids, for_each_dialect
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


NOISY_SQL = for_each_dialect(_noisy)

#: The messages a claim's row picker takes, by mode: ``any`` every one, ``quiet`` those of groups not in
#: ``:noisy`` (and those without a group), ``noisy`` those of the groups in ``:noisy``.
TAKES: dict[str, Callable[[Dialect], str]] = {
    "any": lambda d: "TRUE",
    "quiet": lambda d: f"(group_id IS NULL OR group_id NOT IN {d.in_texts(':noisy')})",
    "noisy": lambda d: f"group_id IN {d.in_texts(':noisy')}",
}
# Passing over a queue row another transaction holds: one that marks it too, or changes it (and if that
# one rolls back, the queue's next grouped send marks it).  So an application's open transaction that
# sent a queue's first group id holds up no other sender (an insert's foreign key check does not wait
# for this lock either).
_MARK = for_each_dialect(
    lambda d: (
        "UPDATE durableq_queues SET grouped = TRUE WHERE id = "
        f"(SELECT id FROM durableq_queues WHERE id = ? AND NOT grouped {d.skip_locked_no_key})"
    )
)


@dataclass(frozen=True, slots=True)
class Order:
    """The order of one receive: the modes of :data:`TAKES` its claims take, in turn."""

    modes: tuple[str, ...]

    def claim(self, conn: Connection, params: dict[str, Any], statement: Callable[[str], str]) -> list[Row]:
        """Claim up to ``params["limit"]`` messages with ``statement(mode)`` for each mode in turn, until
        the limit is reached; the rows in the order they are served (each claim's oldest first)."""
        rows: list[Row] = []
        for mode in self.modes:
            more = conn.execute(statement(mode), {**params, "limit": params["limit"] - len(rows)}).fetchall()
            if len(more) > 1:  # RETURNING order is unspecified: by enqueued_at, then row id
                more.sort(key=lambda row: (row[6], row[0]))
            rows += more
            if len(rows) >= params["limit"]:
                break
        return rows


_ANY = Order(("any",))


def order(conn: Connection, queue: QueueConfig, params: dict[str, Any]) -> Order:
    """The order of a receive of standard queue ``queue`` (its row read in this write transaction if it
    is grouped; the caller's ``params`` gain the ``:noisy`` groups when there are any)."""
    if not queue.grouped:
        return _ANY
    noisy = [group for (group,) in conn.execute(NOISY_SQL[conn.dialect], params)]
    if not noisy:
        return _ANY
    params["noisy"] = encode_ids(noisy)
    return Order(("quiet", "noisy"))


def mark(conn: Connection, queue: QueueConfig, catalog: Catalog | None = None) -> None:
    """Standard queue ``queue`` takes a message with a group id: from now on its receives are fair.
    Call only where ``queue.grouped`` is false (the row as the caller read it), inside the write that
    stores the message; ``catalog``: the caller's, whose cached row is dropped."""
    conn.execute(_MARK[conn.dialect], (queue.id,))
    if catalog is not None:
        catalog.forget(queue.name)
