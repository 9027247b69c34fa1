"""A message's state, defined once: every statement and check that asks "is it in flight?",
"has it been received?" or "which state is it in?" uses these definitions.

A row is *received* once a receive claimed it in its current queue (``receive_count > 0``; a move
task resets the count, so a moved-back message starts over).  It is *in flight* while received and
hidden (``visible_at`` after now); a received message whose visibility timeout ended is visible
again.  *Delayed* is hidden and never received.
"""

from __future__ import annotations

from .. import limits
from ..types import MESSAGE_STATES

#: SQL true for a row that has been received in its queue.
RECEIVED_SQL = "receive_count > 0"


def in_flight_sql(now: str = ":now") -> str:
    """SQL true for a row in flight at ``now`` (an SQL expression)."""
    return f"({RECEIVED_SQL} AND visible_at > {now})"


#: A row's state at ``:now``; stats, peek and the Spark reader all classify with it.
STATE_SQL = f"""CASE
  WHEN visible_at <= :now THEN 'visible'
  WHEN {RECEIVED_SQL} THEN 'in_flight'
  ELSE 'delayed' END"""

#: The states :data:`STATE_SQL` yields, as ``durableq.types.MESSAGE_STATES`` declares them.
STATES = tuple(state.name for state in MESSAGE_STATES)

#: SQL for the latest a received row may stay hidden: a receive plus all its extensions last at
#: most 12 hours (``received_at`` is the time of the latest receive).
VISIBILITY_CAP_SQL = f"(received_at + {limits.MAX_TOTAL_VISIBILITY * 1000})"
