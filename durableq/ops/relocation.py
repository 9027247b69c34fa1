"""Relocation: moving messages from one queue to another, the one operation behind both kinds of
move — a dead-letter move (a receive finds a message received too often) and a message move task
(messages leave a dead-letter queue, back to their sources or to a destination).

Whatever the kind, a move keeps these rules, written here once:

- an expired message never moves (expired means gone, whatever the sweeper has done);
- FIFO messages arrive at the tail of their group in the target, in their sequence order, with the
  target's next sequence numbers and a new enqueue time; a move task moves a group only as a whole
  and never while a message of it is in flight, so a group never overtakes its own in-flight head;
- the per-minute counters of both queues count what actually moved.

The kinds differ only in what the message keeps: a dead letter keeps its receive count and records
its source (a standard one keeps its enqueue time, so retention keeps counting); a message moved by a
task arrives as a new message (received 0 times, no source).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from enum import Enum

from ..engines.base import Connection
from ..engines.dialect import Dialect, encode_ids, for_each_dialect
from . import fairness, fifo, history
from .counters import MOVED, MOVED_IN, MOVED_OUT, Counters
from .queue_rows import QueueConfig
from .retention import expired_before
from .sealing import Sealer
from .states import in_flight_sql


class Kind(Enum):
    """What a move is for; it decides what the message keeps and which counters count it."""

    DEAD_LETTER = "dead letter"
    MOVE_TASK = "move task"


# What a moved row becomes in its new queue, by kind (SET clauses after the common ones).
# A message of a virtual queue arrives as a message of the target queue itself.
_ARRIVAL = {
    Kind.DEAD_LETTER: "dead_letter_source = :source_name, virtual = NULL",
    Kind.MOVE_TASK: "dead_letter_source = NULL, receive_count = 0, first_received_at = NULL, virtual = NULL",
}
# Rows of the source that may move: its own, not expired.  A FIFO move lists them in sequence order.
# (``+queue_id``: the row ids pick the rows through the primary key; without it SQLite would walk the
# queue's whole durableq_ix_messages_enqueued range, every unexpired message of the source, for each move.)
_MOVABLE_WHERE = for_each_dialect(
    lambda d: f"id IN {d.in_ids(':ids')} AND +queue_id = :source_id AND enqueued_at > :expired_before"
)
_MOVABLE = for_each_dialect(
    lambda d: f"SELECT id, group_id FROM durableq_messages WHERE {_MOVABLE_WHERE[d]} ORDER BY sequence, id"
)
# The same rows once they arrived.
_ARRIVED_WHERE = for_each_dialect(lambda d: f"id IN {d.in_ids(':ids')} AND +queue_id = :target_id")
# Which event a move is in the source's history.
_LEFT = {Kind.DEAD_LETTER: history.MOVED_TO_DEAD_LETTER, Kind.MOVE_TASK: history.MOVED_OUT}


def _standard_move(d: Dialect, kind: Kind) -> str:
    return f"""
UPDATE durableq_messages
SET queue_id = :target_id, visible_at = :now, receipt_handle = NULL, received_at = NULL,
  {_ARRIVAL[kind]}
WHERE {_MOVABLE_WHERE[d]}
"""


def _fifo_append(kind: Kind) -> str:
    return f"""
UPDATE durableq_messages
SET queue_id = :target_id, sequence = :sequence, enqueued_at = :now, visible_at = :now,
  receipt_handle = NULL, received_at = NULL, {_ARRIVAL[kind]}
WHERE id = :id
"""


_STATEMENTS = for_each_dialect(
    lambda d: {kind: (_standard_move(d, kind), _fifo_append(kind)) for kind in Kind}
)


def move(
    conn: Connection,
    kind: Kind,
    source: QueueConfig,
    target: QueueConfig,
    row_ids: Sequence[int],
    now: int,
    counters: Counters,
    sealer: Sealer,
) -> int:
    """Move rows of ``source`` to ``target`` (in the caller's write transaction); returns how many moved.

    Rows that are not ``source``'s, or that expired, stay where they are.  Rows that arrive encrypted
    otherwise than ``target`` encrypts are re-sealed for it in the same transaction.
    """
    if not row_ids:
        return 0
    dialect = conn.dialect
    standard, append = _STATEMENTS[dialect][kind]
    params = {
        "ids": encode_ids(row_ids),
        "source_id": source.id,
        "target_id": target.id,
        "source_name": source.name,
        "now": now,
        "expired_before": expired_before(source.retention_period, now),
    }
    history.record_where(conn, source, now, _LEFT[kind], _MOVABLE_WHERE[dialect], params, target.name)
    if not source.fifo:
        moved = conn.execute(standard, params).rowcount
    else:
        rows: list[tuple[int, str]] = conn.execute(_MOVABLE[dialect], params).fetchall()
        moved = len(rows)
        if rows:
            sequences = fifo.take_sequences(conn, target.id, moved)
            conn.executemany(
                append,
                [{**params, "id": row_id, "sequence": seq} for (row_id, _), seq in zip(rows, sequences)],
            )
            groups = {group for _, group in rows}
            for group in groups:
                fifo.add_to_group(conn, target.id, group, now)
            fifo.refresh_groups(conn, source.id, groups)
    if moved and (source.sealed or target.sealed):  # else no row of either can be encrypted
        sealer.reseal(conn, target, row_ids, now)
    if moved and (source.grouped or source.fifo) and not (target.grouped or target.fifo):
        fairness.mark(conn, target)  # rows with group ids arrived in a standard queue
    history.record_where(conn, target, now, history.MOVED_IN, _ARRIVED_WHERE[dialect], params, source.name)
    if moved:
        counters.add(source.name, now, MOVED if kind is Kind.DEAD_LETTER else MOVED_OUT, moved)
        counters.add(target.name, now, MOVED_IN, moved)
    return moved


# -- what a message move task takes next --------------------------------------------

_NEXT_STANDARD = f"""
SELECT id, dead_letter_source FROM durableq_messages
WHERE queue_id = :queue_id AND enqueued_at > :expired_before AND NOT {in_flight_sql()}
ORDER BY enqueued_at, id LIMIT :limit
"""
# FIFO: the groups (every group with messages has a fifo_groups row) none of whose messages is in
# flight, oldest group first; read lazily, so a batch looks only at the groups it takes.
_NEXT_GROUPS = f"""
SELECT g.group_id FROM durableq_fifo_groups g
WHERE g.queue_id = :queue_id AND NOT EXISTS (
  SELECT 1 FROM durableq_messages WHERE queue_id = g.queue_id AND group_id = g.group_id AND {in_flight_sql()})
ORDER BY g.id
"""
_GROUP_ROWS = """
SELECT id, dead_letter_source FROM durableq_messages
WHERE queue_id = :queue_id AND group_id = :group_id AND enqueued_at > :expired_before
ORDER BY sequence
"""


def next_batch(conn: Connection, source: QueueConfig, limit: int, now: int) -> list[tuple[int, str | None]]:
    """The rows a message move task moves next from ``source``: (row id, dead-letter source).

    Never messages in flight (a consumer holding one keeps it until it lets go) nor expired ones.
    On a FIFO queue only whole groups with nothing in flight; a batch grows past ``limit`` rather
    than split a group.
    """
    cutoff = expired_before(source.retention_period, now)
    params = {"queue_id": source.id, "now": now, "limit": limit, "expired_before": cutoff}
    if not source.fifo:
        return conn.execute(_NEXT_STANDARD, params).fetchall()
    batch: list[tuple[int, str | None]] = []
    groups = conn.execute(_NEXT_GROUPS, params)
    try:
        for (group_id,) in groups:
            if len(batch) >= limit:
                break
            batch += conn.execute(_GROUP_ROWS, {**params, "group_id": group_id}).fetchall()
    finally:
        groups.close()
    return batch


def by_destination(
    rows: Sequence[tuple[int, str | None]], destination: str | None
) -> dict[str | None, list[int]]:
    """Rows grouped by where they go: ``destination`` if given, else each one's dead-letter source
    (None for a message that has no source to go back to)."""
    targets: dict[str | None, list[int]] = defaultdict(list)
    for row_id, source in rows:
        targets[destination or source].append(row_id)
    return targets
