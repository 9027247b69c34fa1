"""Firing: each due tick claimed and sent in one transaction, so that it is sent exactly once however
many schedulers run.

A round reads the due schedules, then for each one opens a transaction (``Broker.transaction()``'s own
machinery, ``durableq/transaction.py``), claims the tick there (``ops/schedules.claim``: an UPDATE
guarded by the row's version, which moves the schedule on to its next tick) and sends the message with
``transaction=tx``.  Both commit together or not at all: a scheduler killed between the two leaves the
tick unclaimed and unsent, and the next round (of any scheduler) sends it; of two schedulers claiming at
once, one UPDATE matches and the other's transaction sends nothing.  On a FIFO queue the message's
deduplication id (name and scheduled time) would stop a second copy too.

Missed ticks (no scheduler ran): ``catch_up="all"`` sends each one, oldest first; ``"latest"`` one
send, for the latest; ``"none"`` sends a tick only while it is at most ``limits.SCHEDULE_LATE_GRACE``
seconds past its send time.  A tick that cannot be sent (its queue was
deleted, its message is too large for it) is logged as an error and skipped: it would fail the same
way at every round.  A tick that this scheduler cannot send but another may (no keyring for an
encrypted queue, no payload store for a large message) is not claimed: it is logged, once a round,
and stays due for a scheduler that can.  A schedule this host cannot read (a time zone its tzdata
lacks) is logged and left for this round: the other schedules fire, and a scheduler that can read it
sends its tick.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime

from .. import limits
from .. import transaction as transactions
from ..engines.base import Connection
from ..errors import DatabaseError, DurableQError, InvalidParameterValue, KmsAccessDenied, KmsNotFound, Reason
from ..ops import attributes as message_attributes
from ..ops import broker_calls
from ..ops import schedules as rows
from ..ops.runtime import Runtime
from ..queue import Queue
from ..types import Attribute, datetime_from_ms
from . import definition
from .expressions import iso

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScheduledSend:
    """One tick sent: the schedule, its queue, the tick's scheduled time and the message's id."""

    schedule: str
    queue: str
    scheduled_time: datetime
    message_id: str


@dataclass(frozen=True)
class FiringRound:
    """What one round of :meth:`Broker.fire_due_schedules` did: the ticks it sent, and when the
    soonest tick waiting is due (None: none is)."""

    sent: list[ScheduledSend]
    next_due: datetime | None


def fire_due(rt: Runtime) -> FiringRound:
    """One round (see the module)."""
    now = rt.now_ms()
    with rt.db.statement() as conn:
        due = rows.due(conn, now, limits.SCHEDULER_BATCH)
    sent: list[ScheduledSend] = []
    claimed = 0  # ticks claimed in this round, sent or not: what limits.SCHEDULER_BATCH bounds
    for row in due:
        if claimed >= limits.SCHEDULER_BATCH:
            break  # the next round takes the rest
        try:
            sent_now, claimed_now = _fire(rt, row, now, limits.SCHEDULER_BATCH - claimed)
            sent.extend(sent_now)
            claimed += claimed_now
        except DatabaseError:
            raise
        except DurableQError as exc:  # its time zone unknown to this host's tzdata, say: not the others'
            log.error(
                "schedule %s cannot be read on this host (%s: %s); it is skipped in this round",
                row.name,
                exc.code,
                exc,
            )
    with rt.db.statement() as conn:
        soonest = rows.next_due(conn)
    return FiringRound(sent, None if soonest is None else datetime_from_ms(soonest))


def _fire(rt: Runtime, row: rows.ScheduleRow, now: int, budget: int) -> tuple[list[ScheduledSend], int]:
    """The ticks of ``row`` due at ``now``, at most ``budget`` of them, claimed and sent (nothing if
    another scheduler claimed them first); and how many were claimed (sent, missed or failed: each
    costs the round a transaction)."""
    sent: list[ScheduledSend] = []
    claimed = 0
    while claimed < budget and row.send_at is not None and row.send_at <= now:
        assert row.next_fire_at is not None
        if row.catch_up == "all":
            tick, send = row.next_fire_at, True
        else:
            # Missed: a later tick whose whole window has passed too (one still within its window is
            # not missed, and sending the latest then would jump over the tick due now).
            window = row.flexible_window * 1000
            tick = definition.latest_tick(row, row.next_fire_at, max(row.next_fire_at, now - window))
            late = now - max(tick, row.send_at if tick == row.next_fire_at else tick)
            send = row.catch_up == "latest" or late <= limits.SCHEDULE_LATE_GRACE * 1000
        following = definition.next_tick(row, tick)
        send_at = definition.send_time(following, row.flexible_window)
        done = _claim_and_send(rt, row, tick, send, following, send_at)
        if done is None:
            break  # another scheduler (or a change) got there first: its round goes on from here
        claimed += 1
        if isinstance(done, ScheduledSend):
            sent.append(done)
        row = replace(
            row,
            next_fire_at=following,
            send_at=send_at,
            version=row.version + 1,
            last_fire_at=tick if send else row.last_fire_at,
        )
    return sent, claimed


def _claim_and_send(
    rt: Runtime, row: rows.ScheduleRow, tick: int, send: bool, following: int | None, send_at: int | None
) -> ScheduledSend | bool | None:
    """Claim ``tick`` and send it, in one transaction: the send, True (claimed, nothing to send) or
    False (claimed, its send failed and was skipped), or None (another caller claimed it, or this
    scheduler cannot send it: see :func:`_not_here`)."""
    try:
        fifo = broker_calls.is_fifo(rt, row.queue) if send else False  # (read before the transaction)
        with transactions.begin(rt) as tx:
            inside = transactions.runtime_for(rt, tx)
            with inside.db.write() as conn:
                if not rows.claim(conn, row, following, send_at, tick if send else None):
                    return None
            if not send:
                log.info("schedule %s: tick %s missed (catch_up=none): not sent", row.name, iso(tick))
                return True
            message_id = _send(rt, row, tick, fifo, tx)
    except DatabaseError:
        raise
    except DurableQError as exc:
        if _not_here(exc):  # (the transaction rolled back: the tick is not claimed)
            log.warning(
                "schedule %s: this scheduler cannot send the tick %s to %s (%s: %s); it stays due for "
                "a scheduler that can",
                row.name,
                iso(tick),
                row.queue,
                exc.code,
                exc,
            )
            return None
        log.error(
            "schedule %s: the tick %s could not be sent to %s (%s: %s); it is skipped",
            row.name,
            iso(tick),
            row.queue,
            exc.code,
            exc,
        )
        with rt.db.write() as conn:
            return False if rows.claim(conn, row, following, send_at, None) else None
    log.info("schedule %s: sent tick %s to %s (message %s)", row.name, iso(tick), row.queue, message_id)
    return ScheduledSend(row.name, row.queue, datetime_from_ms(tick), message_id)


def _not_here(exc: DurableQError) -> bool:
    """Whether ``exc`` says that this scheduler, not the tick, cannot send: its broker lacks the keyring
    (or the key) of an encrypted queue, or the payload store of a large message, which another
    scheduler's broker may have.  Such a tick is left unclaimed, not skipped."""
    return isinstance(exc, (KmsAccessDenied, KmsNotFound)) or (
        isinstance(exc, InvalidParameterValue) and exc.parameter == "payload_dir"
    )


def _attributes(row: rows.ScheduleRow, tick: int) -> dict[str, Attribute]:
    """A tick's message attributes: the schedule's, and durableq's two (its name and the tick)."""
    attributes = dict(message_attributes.decode(row.attributes))
    ours = {limits.SCHEDULE_NAME_ATTRIBUTE: row.name, limits.SCHEDULED_TIME_ATTRIBUTE: iso(tick)}
    attributes.update(message_attributes.normalize(ours))
    return attributes


def check_size(rt: Runtime, conn: Connection, row: rows.ScheduleRow) -> None:
    """InvalidParameterValue if a tick's message (the body and :func:`_attributes`, counted as a send
    counts them) is larger than ``row``'s queue takes, which would skip every tick; QueueDoesNotExist
    if there is no such queue.  A queue with ``large_payloads`` takes it whatever its size."""
    queue = rt.catalog.get(conn, row.queue)
    size = len(row.body.encode("utf-8")) + message_attributes.size(_attributes(row, row.anchor_at))
    if size > queue.maximum_message_size and not queue.large_payloads:
        raise InvalidParameterValue(
            template="each tick's message would be {value} bytes (the body, its attributes and durableq's "
            "two, counted as a send counts them); queue {queue!r} allows at most {high}",
            parameter="body",
            value=size,
            high=queue.maximum_message_size,
            queue=row.queue,
            reason=Reason.TOO_LARGE,
        )


def _send(rt: Runtime, row: rows.ScheduleRow, tick: int, fifo: bool, tx: transactions.Transaction) -> str:
    result = Queue(rt, row.queue, fifo).send(
        row.body,
        attributes=_attributes(row, tick),
        group_id=row.name if fifo else None,
        deduplication_id=f"{row.name}@{iso(tick)}" if fifo else None,
        transaction=tx,
    )
    return result.message_id
