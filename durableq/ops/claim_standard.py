"""A standard queue's claim: the statements that take its visible messages (the in-flight limit and
the fair order inside them), and the dead-letter moves of the messages they would take.

Settings come from the live queue row inside each statement (see ``_LIVE``); the order of a grouped
queue's receive is :mod:`.fairness`'s.
"""

from __future__ import annotations

from ..engines.base import Connection
from ..engines.dialect import Dialect, for_each_dialect
from ..types import Message
from . import fairness, history, redrive, relocation
from .counters import Counters
from .message_rows import COLUMNS, MessageReader, claim_set
from .queue_rows import QueueConfig
from .retention import unexpired_sql
from .stats import IN_FLIGHT_ROOM_SQL

# Settings come from the live queue row inside the statement, so a cached row
# that went stale cannot make a claim wrong; a deleted queue (ids are never
# reused) matches nothing, and the caller then re-reads the row.
_LIVE = "(SELECT {} FROM durableq_queues WHERE id = :queue_id)"
# A queue's own messages, or those of one of its virtual queues (``:virtual``; durableq_ix_messages_virtual).
_OWNER = {False: "virtual IS NULL", True: "virtual = :virtual"}


def head_where(virtual: bool) -> str:
    """Visible, unexpired rows of ``:queue_id`` (of its virtual queue ``:virtual`` if ``virtual``)."""
    return f"""queue_id = :queue_id AND {_OWNER[virtual]} AND visible_at <= :now
  AND {unexpired_sql(_LIVE.format("retention_period"))}"""


# The head of durableq_ix_messages_visible (durableq_ix_messages_virtual): visible, unexpired rows,
# earliest visible first (of the messages a fair order's mode takes).
_HEAD = for_each_dialect(
    lambda d: {
        (v, fair): "SELECT id, receive_count FROM durableq_messages "
        f"WHERE {head_where(v)} AND {fairness.TAKES[fair](d)} ORDER BY visible_at LIMIT :limit"
        for v in (False, True)
        for fair in fairness.TAKES
    }
)


# The in-flight limit is part of the claim: the statement takes only as many as fit (the limit is
# the queue's, its virtual queues' messages included).  ``fair``: which messages, by the fair order's
# mode (fairness.py).
def _claim_head(d: Dialect, virtual: bool, fair: str) -> str:
    return f"""
UPDATE durableq_messages
SET {claim_set(d, f":now + coalesce(:timeout, {_LIVE.format('visibility_timeout')}) * 1000")}
WHERE id IN (
  SELECT id FROM durableq_messages WHERE {head_where(virtual)} AND {redrive.NOT_EXHAUSTED_SQL}
    AND (:sealed OR data_key_id IS NULL) AND {fairness.TAKES[fair](d)}
  ORDER BY visible_at LIMIT {IN_FLIGHT_ROOM_SQL} {d.skip_locked})
RETURNING {COLUMNS}
"""


_CLAIM_HEAD = for_each_dialect(
    lambda d: {(v, fair): _claim_head(d, v, fair) for v in (False, True) for fair in fairness.TAKES}
)


def claim_standard(
    conn: Connection,
    queue: QueueConfig,
    limit: int,
    visibility_timeout: int | None,
    now: int,
    target: QueueConfig | None,
    counters: Counters,
    virtual: str | None,
    reader: MessageReader,
) -> list[Message]:
    """Claim up to ``limit`` messages of standard queue ``queue`` in its fair order, moving those
    received ``max_receive_count`` times to dead-letter queue ``target`` instead."""
    mine = virtual is not None
    params = {
        "virtual": virtual,
        "queue_id": queue.id,
        "now": now,
        "limit": limit,
        "timeout": visibility_timeout,
        "cap": queue.in_flight_limit,
        # Sealed rows are claimed only where the queue row (fresh: in a transaction) says the queue is
        # sealed.  A cached row that went stale (sealed since) claims none on the one-statement path,
        # which could not give them back if their key is missing; finding nothing, it re-reads the row.
        "sealed": queue.sealed,
    }
    order = fairness.order(conn, queue, params)
    if target is not None:
        # A message received max_receive_count times goes to the dead-letter queue instead (of those
        # each claim of the order would take).
        for fair in order.modes:
            while over := [
                row_id
                for row_id, count in conn.execute(_HEAD[conn.dialect][mine, fair], params)
                if redrive.exhausted(count, queue)
            ]:
                relocation.move(
                    conn, relocation.Kind.DEAD_LETTER, queue, target, over, now, counters, reader.sealer
                )
    rows = order.claim(conn, params, lambda fair: _CLAIM_HEAD[conn.dialect][mine, fair])
    if queue.history:
        history.record(conn, queue, now, history.RECEIVED, [(row[1], row[5]) for row in rows])
    return reader.messages(conn, rows)
