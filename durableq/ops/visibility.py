"""Delete and change visibility: what a receipt handle lets its holder do.

On a standard queue each is one statement that names the queue and the
message, atomic by itself, on the broker's cached queue row; when it matches
nothing, a fresh look at the queue and the message says why.  On a FIFO queue
the message's group changes too, so the caller runs these inside its write
transaction (where the cached row is checked first).
"""

from __future__ import annotations

from .. import limits, validation
from ..engines.base import Connection
from ..engines.dialect import Dialect, encode_ids, for_each_dialect
from ..errors import DurableQError, InvalidParameterValue, MessageNotInflight, Reason, ReceiptHandleIsInvalid
from . import fifo, history, in_flight, receipts
from .counters import DELETED, Counters
from .queue_rows import Catalog, QueueConfig
from .retention import unexpired_sql
from .states import VISIBILITY_CAP_SQL

# Expired means gone, whatever the sweeper has done: the statements read the retention period
# from the live queue row and act on no expired message.
#: The ``parameter`` of errors about a receipt handle, and about a visibility timeout it is given.
RECEIPT_HANDLE = "receipt_handle"
VISIBILITY_TIMEOUT = "visibility timeout"
_UNEXPIRED = unexpired_sql("(SELECT retention_period FROM durableq_queues WHERE id = :queue_id)")
# Standard queues: any handle ever issued for the message deletes it (row and secret match).
_DELETE_ANY_HANDLE = (
    "DELETE FROM durableq_messages WHERE id = :row AND secret = :secret AND queue_id = :queue_id"
)
# The same, for a queue that keeps history: the event needs the message's id and receive count.
_DELETE_ANY_HANDLE_RETURNING = f"{_DELETE_ANY_HANDLE} RETURNING message_id, receive_count"


# Several handles of a queue that keeps history, in one statement: :rows holds the handles' row ids
# and :keys their "row.secret" pairs (JSON lists); a row goes if one of them names it with its secret.
# (``+queue_id``: the row ids pick the rows through the primary key, never a scan of the queue's index.)
def _delete_handles_returning(d: Dialect) -> str:
    return f"""
DELETE FROM durableq_messages
WHERE id IN {d.in_ids(":rows")} AND +queue_id = :queue_id
  AND CAST(id AS TEXT) || '.' || secret IN {d.in_texts(":keys")}
RETURNING message_id, receive_count
"""


_DELETE_HANDLES_RETURNING = for_each_dialect(_delete_handles_returning)
# FIFO queues: only the latest handle, and only while the message is still in flight.
_DELETE_LATEST_IN_FLIGHT = f"""
DELETE FROM durableq_messages
WHERE id = :row AND receipt_handle = :handle AND visible_at > :now AND queue_id = :queue_id AND {_UNEXPIRED}
RETURNING group_id, message_id, receive_count
"""
# The latest handle only, within the 12-hour cap; ``extend`` ends at the cap rather than refuse.
_CHANGE = f"""
UPDATE durableq_messages SET visible_at = :visible_at
WHERE id = :row AND receipt_handle = :handle AND queue_id = :queue_id AND :visible_at <= {VISIBILITY_CAP_SQL}
  AND {_UNEXPIRED}
RETURNING group_id, visible_at, message_id, receive_count
"""
_EXTEND = f"""
UPDATE durableq_messages SET visible_at = CASE WHEN :visible_at < {VISIBILITY_CAP_SQL} THEN :visible_at
  ELSE {VISIBILITY_CAP_SQL} END
WHERE id = :row AND receipt_handle = :handle AND queue_id = :queue_id AND {_UNEXPIRED}
RETURNING group_id, visible_at, message_id, receive_count
"""
# A claim undone: the row visible at once and its receive uncounted (the SET reads the values before it).
# Only while the claim holds (``visible_at > :now``): a second put_back of the same messages, or one
# after their visibility timeout, finds them visible and counts nothing off twice.
_PUT_BACK = """
UPDATE durableq_messages SET visible_at = :now, receive_count = receive_count - 1,
  first_received_at = CASE WHEN receive_count = 1 THEN NULL ELSE first_received_at END
WHERE id = :row AND receipt_handle = :handle AND queue_id = :queue_id AND visible_at > :now
RETURNING group_id, visible_at, message_id, receive_count
"""
_DIAGNOSE = f"""
SELECT receipt_handle, {VISIBILITY_CAP_SQL}, {_UNEXPIRED} FROM durableq_messages
WHERE id = :row AND queue_id = :queue_id AND secret = :secret
"""


def _params(receipt: receipts.Receipt) -> dict[str, object]:
    return {
        "row": receipt.row_id,
        "secret": receipt.secret,
        "handle": receipt.handle,
        "queue_id": receipt.queue_id,
    }


def _queue_of(conn: Connection, catalog: Catalog, name: str, receipt: receipts.Receipt) -> QueueConfig:
    """The queue, checking the handle is one of its own (a cached row is re-read before refusing)."""
    queue = catalog.get(conn, name)
    if receipt.queue_id != queue.id:
        queue = catalog.get(conn, name, fresh=True)
        receipt.check_queue(queue.id, name)
    return queue


def delete(
    conn: Connection, catalog: Catalog, name: str, handle: object, now: int, counters: Counters
) -> None:
    """Delete the message a handle names; on a standard queue a message already gone is fine."""
    receipt = receipts.parse(handle)
    queue = _queue_of(conn, catalog, name, receipt)
    params = _params(receipt)
    if not queue.fifo:
        with history.atomic(conn, queue):
            if queue.history:
                rows = conn.execute(_DELETE_ANY_HANDLE_RETURNING, params).fetchall()
                history.record(conn, queue, now, history.DELETED, rows)
                gone = len(rows)
            else:
                gone = conn.execute(_DELETE_ANY_HANDLE, params).rowcount
        if not gone:
            catalog.get(conn, name, fresh=True)  # QueueDoesNotExist if the queue is gone
            return  # deleted before: deleting again succeeds
    else:
        row = conn.execute(_DELETE_LATEST_IN_FLIGHT, {**params, "now": now}).fetchone()
        if row is None:
            catalog.get(conn, name, fresh=True)
            raise ReceiptHandleIsInvalid(
                template="receipt handle {value!r} no longer deletes on FIFO queue {queue!r}: "
                "only the latest handle of a message still in flight does (its visibility timeout "
                "expired, it was received again, or it is gone)",
                parameter=RECEIPT_HANDLE,
                value=receipt.handle,
                queue=name,
                reason=Reason.NOT_FOUND,
            )
        fifo.refresh_groups(conn, queue.id, [row[0]])
        history.record(conn, queue, now, history.DELETED, [row[1:]])
    counters.add(name, now, DELETED)


def delete_many(
    conn: Connection, queue: QueueConfig, handles: list[object], now: int, counters: Counters
) -> list[DurableQError | None]:
    """Delete the messages of several handles of a standard queue in the caller's transaction.

    One executemany for the well-formed handles of this queue; an outcome per
    handle (None for done), since a message already gone is fine here too.
    """
    outcomes: list[DurableQError | None] = []
    valid: list[receipts.Receipt] = []
    for handle in handles:
        try:
            receipt = receipts.parse(handle)
            receipt.check_queue(queue.id, queue.name)
        except DurableQError as exc:
            outcomes.append(exc)
            continue
        outcomes.append(None)
        valid.append(receipt)
    params = [_params(receipt) for receipt in valid]
    if params and queue.history:
        rows = encode_ids(r.row_id for r in valid)
        keys = encode_ids(f"{r.row_id}.{r.secret}" for r in valid)
        gone = conn.execute(
            _DELETE_HANDLES_RETURNING[conn.dialect], {"queue_id": queue.id, "rows": rows, "keys": keys}
        ).fetchall()
        history.record(conn, queue, now, history.DELETED, gone)
        if gone:
            counters.add(queue.name, now, DELETED, len(gone))
    elif params:
        if deleted := conn.executemany(_DELETE_ANY_HANDLE, params).rowcount:
            counters.add(queue.name, now, DELETED, deleted)
    return outcomes


def change(
    conn: Connection,
    catalog: Catalog,
    name: str,
    handle: object,
    timeout: object,
    now: int,
    *,
    up_to_cap: bool = False,
) -> int:
    """Hide the message until ``now + timeout`` (0: visible at once), within 12 h of its receive.

    With ``up_to_cap`` a timeout past the 12-hour cap ends at the cap instead of being refused.
    Returns the seconds the message is now hidden for.
    """
    seconds = validation.integer(VISIBILITY_TIMEOUT, timeout, 0, limits.MAX_VISIBILITY_TIMEOUT)
    receipt = receipts.parse(handle)
    queue = _queue_of(conn, catalog, name, receipt)
    if queue.fifo:  # a message whose timeout ended may go back in flight: the bound no longer holds
        in_flight.forget(conn, queue)
    params = {**_params(receipt), "visible_at": now + seconds * 1000, "now": now}
    with history.atomic(conn, queue):
        row = conn.execute(_EXTEND if up_to_cap else _CHANGE, params).fetchone()
        if row is not None:
            group_id, visible_at = row[0], int(row[1])
            if group_id is not None and queue.fifo:  # (a standard queue's group is a fair tenant)
                fifo.refresh_groups(conn, queue.id, [group_id])
            history.record(conn, queue, now, history.VISIBILITY_CHANGED, [row[2:]], visible_at=visible_at)
            return max((visible_at - now) // 1000, 0)
    queue = catalog.get(conn, name, fresh=True)
    receipt.check_queue(queue.id, name)
    current = conn.execute(_DIAGNOSE, params).fetchone()
    if current is None or not current[2]:
        raise InvalidParameterValue(
            template="the message of receipt handle {value!r} no longer exists in {queue!r} "
            "(deleted, expired or moved)",
            parameter=RECEIPT_HANDLE,
            value=receipt.handle,
            queue=name,
            reason=Reason.NOT_FOUND,
        )
    latest, cap, _ = current
    if latest != receipt.handle:
        raise MessageNotInflight(
            template="receipt handle {value!r} is not the message's latest: it was received again "
            "since; use the newest receipt handle",
            parameter=RECEIPT_HANDLE,
            value=receipt.handle,
            queue=name,
        )
    left = max((cap - now) // 1000, 0)
    raise InvalidParameterValue(
        template="visibility timeout {value} s would end more than {high} s (12 h) "
        f"after the message was received; at most {left} s is left",
        parameter=VISIBILITY_TIMEOUT,
        value=seconds,
        high=limits.MAX_TOTAL_VISIBILITY,
        queue=name,
        reason=Reason.BEYOND_LIMIT,
    )


def put_back(conn: Connection, catalog: Catalog, name: str, handles: list[str], now: int) -> None:
    """Undo the claims of messages whose receiver left before it got them (a long poll whose client
    hung up while its claim ran): visible at once, their receive uncounted, as if never received.
    A message deleted or moved since is left alone."""
    for handle in handles:
        receipt = receipts.parse(handle)
        queue = _queue_of(conn, catalog, name, receipt)
        if queue.fifo:
            in_flight.forget(conn, queue)
        row = conn.execute(_PUT_BACK, {**_params(receipt), "now": now}).fetchone()
        if row is None:
            continue
        if row[0] is not None and queue.fifo:
            fifo.refresh_groups(conn, queue.id, [row[0]])
        history.record(conn, queue, now, history.VISIBILITY_CHANGED, [row[2:]], visible_at=int(row[1]))
