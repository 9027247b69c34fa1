"""Delete and change visibility: what a receipt handle lets its holder do.

On a standard queue each is one statement that names the queue and the
message, atomic by itself, on the broker's cached queue row; when it matches
nothing, a fresh look at the queue and the message says why.  On a FIFO queue
the message's group changes too, so the caller runs these inside its write
transaction (where the cached row is checked first).
"""

from __future__ import annotations

import sqlite3

from .. import limits
from ..errors import DurableQError, InvalidParameterValue, MessageNotInflight, ReceiptHandleIsInvalid
from . import fifo, receipts, validation
from .counters import DELETED, Counters
from .queue_rows import Catalog, QueueConfig

_MAX_TOTAL_MS = limits.MAX_TOTAL_VISIBILITY * 1000

# Standard queues: any handle ever issued for the message deletes it (row and secret match).
_DELETE_ANY_HANDLE = "DELETE FROM messages WHERE id = :row AND secret = :secret AND queue_id = :queue_id"
# FIFO queues: only the latest handle, and only while the message is still in flight.
_DELETE_LATEST_IN_FLIGHT = """
DELETE FROM messages
WHERE id = :row AND receipt_handle = :handle AND visible_at > :now AND queue_id = :queue_id
RETURNING group_id
"""
_CHANGE = """
UPDATE messages SET visible_at = :visible_at
WHERE id = :row AND receipt_handle = :handle AND :visible_at <= received_at + :cap AND queue_id = :queue_id
RETURNING group_id
"""
_DIAGNOSE = "SELECT receipt_handle, received_at FROM messages WHERE id = ? AND queue_id = ? AND secret = ?"


def _params(receipt: receipts.Receipt) -> dict[str, object]:
    return {
        "row": receipt.row_id,
        "secret": receipt.secret,
        "handle": receipt.handle,
        "queue_id": receipt.queue_id,
    }


def _queue_of(
    conn: sqlite3.Connection, catalog: Catalog, name: str, receipt: receipts.Receipt
) -> QueueConfig:
    """The queue, checking the handle is one of its own (a cached row is re-read before refusing)."""
    queue = catalog.get(conn, name)
    if receipt.queue_id != queue.id:
        queue = catalog.get(conn, name, fresh=True)
        receipt.check_queue(queue.id, name)
    return queue


def delete(
    conn: sqlite3.Connection, catalog: Catalog, name: str, handle: object, now: int, counters: Counters
) -> None:
    """Delete the message a handle names; on a standard queue a message already gone is fine."""
    receipt = receipts.parse(handle)
    queue = _queue_of(conn, catalog, name, receipt)
    params = _params(receipt)
    if not queue.fifo:
        if conn.execute(_DELETE_ANY_HANDLE, params).rowcount == 0:
            catalog.get(conn, name, fresh=True)  # QueueDoesNotExist if the queue is gone
            return  # deleted before: deleting again succeeds
    else:
        row = conn.execute(_DELETE_LATEST_IN_FLIGHT, {**params, "now": now}).fetchone()
        if row is None:
            catalog.get(conn, name, fresh=True)
            raise ReceiptHandleIsInvalid(
                f"receipt handle {receipt.handle!r} no longer deletes on FIFO queue {name!r}: "
                "only the latest handle of a message still in flight does (its visibility timeout "
                "expired, it was received again, or it is gone)"
            )
        fifo.refresh_groups(conn, queue.id, [row[0]])
    counters.add(name, now, DELETED)


def delete_many(
    conn: sqlite3.Connection, queue: QueueConfig, handles: list[object], now: int, counters: Counters
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
            receipt.check_queue(queue.id, queue.name)
        except DurableQError as exc:
            outcomes.append(exc)
            continue
        outcomes.append(None)
        params.append(_params(receipt))
    if params:
        before = conn.total_changes
        conn.executemany(_DELETE_ANY_HANDLE, params)
        if deleted := conn.total_changes - before:
            counters.add(queue.name, now, DELETED, deleted)
    return outcomes


def change(
    conn: sqlite3.Connection, catalog: Catalog, name: str, handle: object, timeout: object, now: int
) -> None:
    """Hide the message until ``now + timeout`` (0: visible at once), within 12 h of its receive."""
    seconds = validation.integer("visibility timeout", timeout, 0, limits.MAX_VISIBILITY_TIMEOUT)
    receipt = receipts.parse(handle)
    queue = _queue_of(conn, catalog, name, receipt)
    params = {**_params(receipt), "visible_at": now + seconds * 1000, "cap": _MAX_TOTAL_MS}
    row = conn.execute(_CHANGE, params).fetchone()
    if row is not None:
        if row[0] is not None:
            fifo.refresh_groups(conn, queue.id, [row[0]])
        return
    queue = catalog.get(conn, name, fresh=True)
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
