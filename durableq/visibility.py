"""Delete and change visibility: what a receipt handle lets its holder do.

On a standard queue each is one statement that names the queue and the
message, atomic by itself; when it matches nothing, a second look says why.
On a FIFO queue the message's group changes too, so the caller runs these
inside its write transaction.
"""

from __future__ import annotations

import sqlite3

from . import fifo, limits, queues, receipts, validation
from .counters import DELETED, Counters
from .errors import DurableQError, InvalidParameterValue, MessageNotInflight, ReceiptHandleIsInvalid

_MAX_TOTAL_MS = limits.MAX_TOTAL_VISIBILITY * 1000
_THIS_QUEUE = "queue_id = :queue_id AND queue_id = (SELECT id FROM queues WHERE name = :queue)"

# Standard queues: any handle ever issued for the message deletes it (row and secret match).
_DELETE_ANY_HANDLE = f"DELETE FROM messages WHERE id = :row AND secret = :secret AND {_THIS_QUEUE}"
# FIFO queues: only the latest handle, and only while the message is still in flight.
_DELETE_LATEST_IN_FLIGHT = f"""
DELETE FROM messages WHERE id = :row AND receipt_handle = :handle AND visible_at > :now AND {_THIS_QUEUE}
RETURNING group_id
"""
_CHANGE = f"""
UPDATE messages SET visible_at = :visible_at
WHERE id = :row AND receipt_handle = :handle AND :visible_at <= received_at + :cap AND {_THIS_QUEUE}
RETURNING group_id
"""
_DIAGNOSE = "SELECT receipt_handle, received_at FROM messages WHERE id = ? AND queue_id = ? AND secret = ?"


def _params(name: str, receipt: receipts.Receipt) -> dict[str, object]:
    return {
        "row": receipt.row_id,
        "secret": receipt.secret,
        "handle": receipt.handle,
        "queue_id": receipt.queue_id,
        "queue": name,
    }


def delete(conn: sqlite3.Connection, name: str, handle: object, now: int, counters: Counters) -> None:
    """Delete the message a handle names; on a standard queue a message already gone is fine."""
    receipt = receipts.parse(handle)
    params = _params(name, receipt)
    if not name.endswith(limits.FIFO_SUFFIX):
        if conn.execute(_DELETE_ANY_HANDLE, params).rowcount == 0:
            queue = queues.load(conn, name)  # QueueDoesNotExist if the queue is gone
            receipt.check_queue(queue.id, name)
            return  # deleted before: deleting again succeeds
    else:
        row = conn.execute(_DELETE_LATEST_IN_FLIGHT, {**params, "now": now}).fetchone()
        if row is None:
            queue = queues.load(conn, name)
            receipt.check_queue(queue.id, name)
            raise ReceiptHandleIsInvalid(
                f"receipt handle {receipt.handle!r} no longer deletes on FIFO queue {name!r}: "
                "only the latest handle of a message still in flight does (its visibility timeout "
                "expired, it was received again, or it is gone)"
            )
        fifo.refresh_groups(conn, receipt.queue_id, [row[0]])
    counters.add(name, now, DELETED)


def delete_many(
    conn: sqlite3.Connection, name: str, queue_id: int, handles: list[object], now: int, counters: Counters
) -> list[DurableQError | None]:
    """Delete the messages of several handles of a standard queue in the caller's transaction.

    One executemany for the well-formed handles of this queue; an outcome per
    handle (None for done), since a message already gone is fine here too.
    """
    outcomes: list[DurableQError | None] = []
    params = []
    for handle in handles:
        try:
            receipt = receipts.parse(handle)
            receipt.check_queue(queue_id, name)
        except DurableQError as exc:
            outcomes.append(exc)
            continue
        outcomes.append(None)
        params.append(_params(name, receipt))
    if params:
        before = conn.total_changes
        conn.executemany(_DELETE_ANY_HANDLE, params)
        if deleted := conn.total_changes - before:
            counters.add(name, now, DELETED, deleted)
    return outcomes


def change(conn: sqlite3.Connection, name: str, handle: object, timeout: object, now: int) -> None:
    """Hide the message until ``now + timeout`` (0: visible at once), within 12 h of its receive."""
    seconds = validation.integer("visibility timeout", timeout, 0, limits.MAX_VISIBILITY_TIMEOUT)
    receipt = receipts.parse(handle)
    params = {**_params(name, receipt), "visible_at": now + seconds * 1000, "cap": _MAX_TOTAL_MS}
    row = conn.execute(_CHANGE, params).fetchone()
    if row is not None:
        if row[0] is not None:
            fifo.refresh_groups(conn, receipt.queue_id, [row[0]])
        return
    queue = queues.load(conn, name)
    receipt.check_queue(queue.id, name)
    current = conn.execute(_DIAGNOSE, (receipt.row_id, queue.id, receipt.secret)).fetchone()
    if current is None:
        raise InvalidParameterValue(
            f"the message of receipt handle {receipt.handle!r} no longer exists in {name!r} "
            "(deleted, expired or moved)"
        )
    latest, received_at = current
    if latest != receipt.handle:
        raise MessageNotInflight(
            f"receipt handle {receipt.handle!r} is not the message's latest: it was received again "
            "since; use the newest receipt handle"
        )
    left = max((received_at + _MAX_TOTAL_MS - now) // 1000, 0)
    raise InvalidParameterValue(
        f"visibility timeout {seconds} s would end more than {limits.MAX_TOTAL_VISIBILITY} s (12 h) "
        f"after the message was received; at most {left} s is left"
    )
