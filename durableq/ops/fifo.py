"""FIFO rules: message groups, deduplication and receive attempts.

Every group with messages has a row in ``fifo_groups`` whose ``available_at``
says when the group may next be served: when its head message is visible and
none of its messages is in flight.  A receive reads the first available
groups from an index, so it never scans groups that are in flight, however
many there are.  Whatever changes a group's head or its in-flight messages
(receive, delete, change visibility, expiry, a dead-letter move) keeps the
row true, in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .. import limits
from ..engines.base import Connection
from ..engines.dialect import Dialect, encode_ids, for_each_dialect
from ..types import Message
from . import redrive
from .message_rows import COLUMNS, MessageReader, claim_ids, claim_set
from .queue_rows import QueueConfig
from .states import RECEIVED_SQL, VISIBILITY_CAP_SQL

_DEDUP_INTERVAL_MS = limits.DEDUPLICATION_INTERVAL * 1000
_ATTEMPT_INTERVAL_MS = limits.RECEIVE_ATTEMPT_INTERVAL * 1000

# -- deduplication -----------------------------------------------------------


def find_duplicate(
    conn: Connection, queue_id: int, scope: str, dedup_id: str, now: int
) -> tuple[str, int] | None:
    """The message id and sequence a deduplication id was accepted for in the last 5 minutes."""
    row = conn.execute(
        "SELECT message_id, sequence FROM durableq_fifo_deduplication "
        "WHERE queue_id = ? AND scope = ? AND deduplication_id = ? AND expires_at > ?",
        (queue_id, scope, dedup_id, now),
    ).fetchone()
    return None if row is None else (row[0], row[1])


def remember(
    conn: Connection,
    queue_id: int,
    scope: str,
    dedup_id: str,
    message_id: str,
    sequence: int,
    now: int,
) -> None:
    conn.execute(
        "INSERT INTO durableq_fifo_deduplication "
        "(queue_id, scope, deduplication_id, message_id, sequence, expires_at) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (queue_id, scope, deduplication_id) DO UPDATE SET message_id = excluded.message_id, "
        "sequence = excluded.sequence, expires_at = excluded.expires_at",
        (queue_id, scope, dedup_id, message_id, sequence, now + _DEDUP_INTERVAL_MS),
    )


def forget_expired(conn: Connection, queue_id: int, now: int) -> None:
    """Drop deduplication ids and receive attempts whose 5-minute windows ended long ago.

    Whether an id still counts is decided by its ``expires_at`` alone (:func:`find_duplicate`);
    removing the row is only housekeeping, so it waits :data:`~durableq.limits.MAX_CLOCK_STEP_BACK`
    more: a clock that steps back (NTP, a resumed VM) still finds every id it should.
    """
    horizon = now - limits.MAX_CLOCK_STEP_BACK * 1000
    conn.execute(
        "DELETE FROM durableq_fifo_deduplication WHERE queue_id = ? AND expires_at <= ?", (queue_id, horizon)
    )
    conn.execute(
        "DELETE FROM durableq_receive_attempts WHERE queue_id = ? AND expires_at <= ?", (queue_id, horizon)
    )


# -- groups ------------------------------------------------------------------


def add_to_group(conn: Connection, queue_id: int, group_id: str, visible_at: int) -> None:
    """A message joined ``group_id`` at its tail: only a new group changes availability."""
    conn.execute(
        "INSERT INTO durableq_fifo_groups (queue_id, group_id, available_at) VALUES (?, ?, ?) "
        "ON CONFLICT (queue_id, group_id) DO NOTHING",
        (queue_id, group_id, visible_at),
    )


def refresh_groups(conn: Connection, queue_id: int, group_ids: Iterable[str]) -> None:
    """Recompute ``available_at`` of groups whose head or in-flight messages changed."""
    for group_id in set(group_ids):
        available_at = _available_at(conn, queue_id, group_id)
        if available_at is None:
            conn.execute(
                "DELETE FROM durableq_fifo_groups WHERE queue_id = ? AND group_id = ?", (queue_id, group_id)
            )
        else:
            conn.execute(
                "UPDATE durableq_fifo_groups SET available_at = ? WHERE queue_id = ? AND group_id = ?",
                (available_at, queue_id, group_id),
            )


def _available_at(conn: Connection, queue_id: int, group_id: str) -> int | None:
    """The head's visible time, or the latest end of visibility among the messages received
    from the head on (receives take a run from the head, so that run holds every message
    in flight); None for an empty group."""
    rows = conn.execute(
        f"SELECT visible_at, {RECEIVED_SQL} FROM durableq_messages "
        "WHERE queue_id = ? AND group_id = ? ORDER BY sequence",
        (queue_id, group_id),
    )
    available_at = None
    try:
        for visible_at, received in rows:
            if available_at is None:
                available_at = visible_at
            elif received:
                available_at = max(available_at, visible_at)
            if not received:
                break
    finally:
        rows.close()
    return available_at


def _block_groups(conn: Connection, queue_id: int, group_ids: Iterable[str], until: int) -> None:
    conn.executemany(
        "UPDATE durableq_fifo_groups SET available_at = ? WHERE queue_id = ? AND group_id = ?",
        [(until, queue_id, g) for g in set(group_ids)],
    )


# -- receive -----------------------------------------------------------------


# The servable groups in the order they became available, each group's messages in send
# order: one lazy cursor (SQLite walks the two indexes in nested loops, no sort), read
# only as far as this receive needs.
_CANDIDATES = """
SELECT g.group_id, m.id, m.visible_at, m.enqueued_at, m.receive_count
FROM durableq_fifo_groups g JOIN durableq_messages m ON m.queue_id = g.queue_id AND m.group_id = g.group_id
WHERE g.queue_id = ? AND g.available_at <= ?
ORDER BY g.available_at, g.id, m.sequence
"""


def choose(
    conn: Connection,
    queue: QueueConfig,
    limit: int,
    now: int,
    expired_before: int,
    dead_letters: bool,
) -> tuple[list[tuple[int, str]], list[tuple[int, str]], set[str]]:
    """Pick up to ``limit`` messages, group by group, each group from its head in order.

    Rows enqueued at or before ``expired_before`` are skipped.  Returns the
    (row id, group) pairs to receive, those to move to the dead-letter queue
    instead (when ``dead_letters``), and groups whose row must be refreshed
    although nothing of them is received.  A group's run ends at its first
    message that is not visible; the rest of that group is passed over.
    """
    chosen: list[tuple[int, str]] = []
    to_dead_letter: list[tuple[int, str]] = []
    stale: set[str] = set()
    served: set[str] = set()
    ended: set[str] = set()
    rows = conn.execute(_CANDIDATES, (queue.id, now))
    try:
        for group_id, row_id, visible_at, enqueued_at, receive_count in rows:
            if group_id in ended:
                continue
            if enqueued_at <= expired_before:
                stale.add(group_id)  # expired: never returned; the sweep removes it
            elif dead_letters and redrive.exhausted(receive_count, queue):
                to_dead_letter.append((row_id, group_id))
                stale.add(group_id)
            elif len(chosen) >= limit:
                break
            elif visible_at > now:
                ended.add(group_id)
                if group_id not in served:
                    stale.add(group_id)  # its row said "available" but it is not: refresh it
            else:
                chosen.append((row_id, group_id))
                served.add(group_id)
    finally:
        rows.close()
    return chosen, to_dead_letter, stale - served


def claim(
    conn: Connection,
    queue: QueueConfig,
    chosen: list[tuple[int, str]],
    visible_at: int,
    now: int,
    reader: MessageReader,
) -> list[Message]:
    """Put the chosen rows in flight and block their groups until ``visible_at``."""
    if not chosen:
        return []
    rows = claim_ids(conn, [row_id for row_id, _ in chosen], visible_at, now)
    if len(rows) > 1:
        order = {row_id: position for position, (row_id, _) in enumerate(chosen)}
        rows.sort(key=lambda row: order[row[0]])
    _block_groups(conn, queue.id, (g for _, g in chosen), visible_at)
    return reader.messages(conn, rows)


# The head of the first servable group, put in flight if it may be received as it is: visible,
# unexpired, and not due to go to the dead-letter queue (the rules of :func:`choose`, in SQL).  The
# group is the one ``choose`` would take first, its head the message ``choose`` would take first.
def _claim_first_head(d: Dialect) -> str:
    return f"""
UPDATE durableq_messages SET {claim_set(d, ":visible_at")}
WHERE id = (
  SELECT id FROM durableq_messages WHERE queue_id = :queue_id AND group_id = (
    SELECT group_id FROM durableq_fifo_groups WHERE queue_id = :queue_id AND available_at <= :now
    ORDER BY available_at, id LIMIT 1)
  ORDER BY sequence LIMIT 1)
AND visible_at <= :now AND enqueued_at > :expired_before AND {redrive.NOT_EXHAUSTED_SQL}
RETURNING {COLUMNS}
"""


_CLAIM_FIRST_HEAD = for_each_dialect(_claim_first_head)
_GROUP_COLUMN = COLUMNS.split(", ").index("group_id")


def claim_first_head(
    conn: Connection,
    queue: QueueConfig,
    visible_at: int,
    now: int,
    expired_before: int,
    reader: MessageReader,
) -> list[Message]:
    """A receive of one message in one statement (issue 30: most receives): the head of the first
    servable group, as :func:`choose` and :func:`claim` would take it, if it may be received as it is;
    none if not (an empty queue, or a head to pass over, refresh or move to the dead-letter queue: for
    ``choose`` to decide).  Rows enqueued at or before ``expired_before`` are not taken."""
    params = {"queue_id": queue.id, "visible_at": visible_at, "now": now, "expired_before": expired_before}
    rows = conn.execute(_CLAIM_FIRST_HEAD[conn.dialect], params).fetchall()
    if rows:
        _block_groups(conn, queue.id, [rows[0][_GROUP_COLUMN]], visible_at)
    return reader.messages(conn, rows)


# The rows of an earlier attempt, as they are now (+queue_id: by primary key, not a walk of the
# queue's whole index; see relocation.py).
def _attempt_rows(d: Dialect) -> str:
    return f"""
SELECT id, receipt_handle, visible_at, group_id FROM durableq_messages
WHERE +queue_id = :queue_id AND id IN {d.in_ids(":ids")}
"""


_ATTEMPT_ROWS = for_each_dialect(_attempt_rows)


def replay_attempt(
    conn: Connection, queue: QueueConfig, attempt_id: str, visible_at: int, now: int, reader: MessageReader
) -> list[Message] | None:
    """The messages of an earlier receive with this attempt id, if none changed since.

    Their visibility timeout starts again, as SQS does for a retried attempt.
    """
    row = conn.execute(
        "SELECT messages FROM durableq_receive_attempts "
        "WHERE queue_id = ? AND attempt_id = ? AND expires_at > ?",
        (queue.id, attempt_id, now),
    ).fetchone()
    if row is None:
        return None
    recorded: list[list[Any]] = json.loads(row[0])
    if not recorded:
        return None
    ids = [entry[0] for entry in recorded]
    current = {
        row_id: (handle, visible, group_id)
        for row_id, handle, visible, group_id in conn.execute(
            _ATTEMPT_ROWS[conn.dialect], {"queue_id": queue.id, "ids": encode_ids(ids)}
        )
    }
    if any(
        current.get(row_id, (None, None))[:2] != (handle, visible) for row_id, handle, visible in recorded
    ):
        return None
    # Restart the visibility timeout, within the 12-hour cap of each receive.
    rows = conn.execute(
        "UPDATE durableq_messages "
        f"SET visible_at = CASE WHEN :visible_at < {VISIBILITY_CAP_SQL} THEN :visible_at "
        f"ELSE {VISIBILITY_CAP_SQL} END WHERE id IN {conn.dialect.in_ids(':ids')} "
        f"RETURNING {COLUMNS}, visible_at",
        {"visible_at": visible_at, "ids": encode_ids(ids)},
    ).fetchall()
    position = {row_id: i for i, row_id in enumerate(ids)}
    rows.sort(key=lambda r: position[r[0]])
    _block_groups(conn, queue.id, (g for _, _, g in current.values()), max(r[-1] for r in rows))
    _store_attempt(conn, queue.id, attempt_id, [[r[0], r[4], r[-1]] for r in rows], now, keep_expiry=True)
    return reader.messages(conn, [r[:-1] for r in rows])


def record_attempt(
    conn: Connection,
    queue_id: int,
    attempt_id: str,
    received: list[Message],
    row_ids: list[int],
    visible_at: int,
    now: int,
) -> None:
    """Remember what a receive with ``attempt_id`` returned, for retries within 5 minutes."""
    entries = [[row_id, message.receipt_handle, visible_at] for row_id, message in zip(row_ids, received)]
    _store_attempt(conn, queue_id, attempt_id, entries, now, keep_expiry=False)


def _store_attempt(
    conn: Connection,
    queue_id: int,
    attempt_id: str,
    entries: list[list[Any]],
    now: int,
    keep_expiry: bool,
) -> None:
    if keep_expiry:
        conn.execute(
            "UPDATE durableq_receive_attempts SET messages = ? WHERE queue_id = ? AND attempt_id = ?",
            (json.dumps(entries), queue_id, attempt_id),
        )
    else:
        conn.execute(
            "INSERT INTO durableq_receive_attempts (queue_id, attempt_id, expires_at, messages) "
            "VALUES (?, ?, ?, ?) "
            "ON CONFLICT (queue_id, attempt_id) DO UPDATE SET expires_at = excluded.expires_at, "
            "messages = excluded.messages",
            (queue_id, attempt_id, now + _ATTEMPT_INTERVAL_MS, json.dumps(entries)),
        )


# -- sequence numbers ---------------------------------------------------------------


def take_sequences(conn: Connection, queue_id: int, count: int) -> range:
    """The next ``count`` sequence numbers of a FIFO queue, taken (inside the caller's write)."""
    (last,) = conn.execute("SELECT next_sequence FROM durableq_queues WHERE id = ?", (queue_id,)).fetchone()
    conn.execute("UPDATE durableq_queues SET next_sequence = ? WHERE id = ?", (last + count, queue_id))
    return range(last + 1, last + count + 1)
