"""Receiving: one atomic claim per attempt, dead-letter moves in the same
transaction, and long polling that wakes on commits from any process.

The long-poll rule is written once (:meth:`Receiver._steps`) and driven two
ways: :meth:`Receiver.receive` blocks its thread on an event, and
:meth:`Receiver.receive_async` awaits an asyncio event while its looks run in
an executor.  Neither polls: the waiting rooms of ``durableq.ops.longpoll``
wake a waiter when the file's change watcher reports a commit or a message
becomes visible."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor

from .. import validation
from ..engines.base import Connection, Database
from ..errors import OverLimit
from ..types import Message
from . import async_steps, fifo, history, in_flight, redrive, relocation, visibility
from .async_steps import Steps
from .claim_standard import claim_standard, head_where
from .counters import EMPTY_RECEIVES, RECEIVED, Counters
from .longpoll import AsyncWaiter, Rooms, ThreadWaiter, Waiter
from .message_rows import MessageReader
from .queue_rows import Catalog, QueueConfig
from .retention import Sweeper, expired_before
from .stats import in_flight_count
from .waiting_receive import WaitingReceive

# A waiting room's look: how many are ready (up to :limit), when the next one will be, and whether
# the queue still exists (a deleted queue's waiters are let in at once, to fail QueueDoesNotExist).
_EXISTS = "EXISTS (SELECT 1 FROM durableq_queues WHERE id = :queue_id)"
_LOOK_STANDARD = {
    v: f"""SELECT
  (SELECT count(*) FROM (SELECT 1 FROM durableq_messages WHERE {head_where(v)} LIMIT :limit) AS ready),
  (SELECT min(visible_at) FROM durableq_messages
    WHERE queue_id = :queue_id {"AND virtual = :virtual" if v else ""} AND visible_at > :now), {_EXISTS}"""
    for v in (False, True)
}
_LOOK_FIFO = f"""SELECT
  (SELECT count(*) FROM (SELECT 1 FROM durableq_fifo_groups
    WHERE queue_id = :queue_id AND available_at <= :now LIMIT :limit) AS ready),
  (SELECT min(available_at) FROM durableq_fifo_groups
   WHERE queue_id = :queue_id AND available_at > :now), {_EXISTS}"""


class Receiver:
    """Receives from the queues of one broker: claims, and waits when asked to."""

    def __init__(
        self,
        db: Database,
        clock_ms: Callable[[], int],
        catalog: Catalog,
        sweeper: Sweeper,
        counters: Counters,
        reader: MessageReader,
        dead_letters: redrive.DeadLetters,
        *,
        real_clock: bool = True,
        remember_in_flight: bool = False,
    ) -> None:
        """``remember_in_flight``: a broker's own receives (see ``in_flight``), not an application's."""
        self._remember_in_flight = remember_in_flight
        self._reader = reader
        self._dead_letters = dead_letters
        self._db = db
        self._clock_ms = clock_ms
        self._catalog = catalog
        self._sweeper = sweeper
        self._counters = counters
        self._rooms = Rooms(db.watcher, self._look, clock_ms, real_clock)

    def receive(
        self,
        name: str,
        max_messages: int,
        visibility_timeout: int | None,
        wait_time: int | None,
        attempt_id: str | None,
        virtual: str | None = None,
    ) -> list[Message]:
        """Receive, blocking this thread (without polling) while it waits.  ``virtual``: from that
        virtual queue of the queue instead of the queue's own messages."""
        # The first look needs no waiter (an event and its condition): most receives end with it.
        first = self._attempt(name, max_messages, visibility_timeout, attempt_id, wait_time, virtual)
        if first[0]:
            return first[0]
        waiter = ThreadWaiter(max_messages)
        steps = self._steps(
            name, max_messages, visibility_timeout, wait_time, attempt_id, waiter, virtual, first
        )
        try:
            timeout = next(steps)
            while True:
                waiter.wait(timeout)
                timeout = steps.send(None)
        except StopIteration as done:
            messages: list[Message] = done.value
            return messages
        finally:
            steps.close()

    async def receive_async(
        self,
        name: str,
        max_messages: int,
        visibility_timeout: int | None,
        wait_time: int | None,
        attempt_id: str | None,
        executor: Executor | None,
        virtual: str | None = None,
        first: tuple[list[Message], QueueConfig] | None = None,
    ) -> list[Message]:
        """Receive from a coroutine: each look runs in ``executor``; the waits hold no thread.
        ``first``: the first look, made by :meth:`start`."""
        loop = asyncio.get_running_loop()
        waiter = AsyncWaiter(max_messages, loop)
        steps = self._steps(
            name, max_messages, visibility_timeout, wait_time, attempt_id, waiter, virtual, first
        )
        put_back = functools.partial(self.put_back, name, attempt_id=attempt_id)
        return await async_steps.drive(steps, waiter, executor, put_back, name)

    def put_back(self, name: str, messages: list[Message], attempt_id: str | None = None) -> None:
        """Undo the receive that claimed ``messages`` of queue ``name`` for a receiver that left before
        it got them: visible at once, their receive uncounted (``visibility.put_back``).

        Not a FIFO receive with an attempt id: its retry (the same id) may have been handed these very
        messages and handles already; putting them back would show them to a third receiver inside
        the retry's visibility timeout.  They wait for the retry instead, as a lost answer's do (SQS's
        way to recover one), or for their visibility timeout."""
        if not messages or (attempt_id is not None and messages[0].sequence_number is not None):
            return
        handles = [m.receipt_handle for m in messages]
        with self._db.write() as conn:
            visibility.put_back(conn, self._catalog, name, handles, self._clock_ms())

    def start(
        self,
        name: str,
        max_messages: int,
        visibility_timeout: int | None,
        wait_time: int | None,
        attempt_id: str | None,
        virtual: str | None = None,
    ) -> list[Message] | WaitingReceive:
        """A receive's first look, in the calling thread: its messages (an empty list if it found none
        and is not to wait), or the receive to await from there (:meth:`WaitingReceive.result`).  For a
        caller already in a thread of the executor: most receives end here, without a second hand-off."""
        first = self._attempt(name, max_messages, visibility_timeout, attempt_id, wait_time, virtual)
        messages, queue = first
        if messages:
            return messages
        if not _wait_of(queue, wait_time):
            return self._empty(queue)
        return WaitingReceive(
            lambda executor: self.receive_async(
                name, max_messages, visibility_timeout, wait_time, attempt_id, executor, virtual, first
            )
        )

    def waiting(self) -> int:
        """How many receives of this broker wait now."""
        return self._rooms.waiting()

    def close(self) -> None:
        """The broker closes: waiting rooms stop looking at the file."""
        self._rooms.close()

    def release(self) -> None:
        """The file is closed: wake every waiting receive (each fails with "the broker is closed")."""
        self._rooms.release()

    def _steps(
        self,
        name: str,
        max_messages: int,
        visibility_timeout: int | None,
        wait_time: int | None,
        attempt_id: str | None,
        waiter: Waiter,
        virtual: str | None,
        first: tuple[list[Message], QueueConfig] | None = None,
    ) -> Steps:
        """The long-poll rule, once for every caller: look; if nothing came and the wait allows, wait in
        the queue's room until admitted, look again, and so on until messages come or the deadline passes.
        Each ``yield`` hands the caller the seconds left; the caller waits for ``waiter`` that long.
        ``first``: the first look, if the caller made it."""
        messages, queue = first or self._attempt(
            name, max_messages, visibility_timeout, attempt_id, wait_time, virtual
        )
        if messages:
            return messages
        wait = _wait_of(queue, wait_time)
        if wait:
            deadline = time.monotonic() + wait
            rooms = self._rooms
            rooms.join(waiter, queue, virtual)  # the room looks once it holds the waiter: nothing slips in
            try:
                while (left := deadline - time.monotonic()) > 0:
                    yield left
                    if not rooms.admitted(waiter):
                        continue  # the deadline passed, or a stale wake-up
                    seen = rooms.generation()
                    messages, queue = self._attempt(
                        name, max_messages, visibility_timeout, attempt_id, wait, virtual
                    )
                    if messages:
                        return messages
                    rooms.back(waiter, queue, seen)
            finally:
                rooms.leave(waiter)
        return self._empty(queue)

    def _empty(self, queue: QueueConfig) -> list[Message]:
        """A receive that ends with nothing: counted in the queue's metrics."""
        self._counters.add(queue.name, self._clock_ms(), EMPTY_RECEIVES)
        return []

    def _attempt(
        self,
        name: str,
        limit: int,
        visibility_timeout: int | None,
        attempt_id: str | None,
        wait_time: int | None,
        virtual: str | None,
    ) -> tuple[list[Message], QueueConfig]:
        db, catalog = self._db, self._catalog
        known = catalog.cached(name)
        # A queue whose cached row, however old, needs the write transaction goes straight to it (which
        # reads the row fresh, and serves a queue of any kind): most FIFO receives (issue 30).
        if known is None or not _needs_transaction(known):
            with db.change() as conn:
                queue = catalog.get(conn, name)
                if not _needs_transaction(queue):
                    # The common case: one claim statement, atomic without an explicit transaction
                    # (with its events, one small one: see history.atomic).  (Encrypted rows are opened
                    # inside a transaction: a receive without a keyring takes nothing.)
                    with history.atomic(conn, queue):
                        messages = self._claim(
                            conn, queue, limit, visibility_timeout, None, wait_time, virtual
                        )
                    if messages:
                        return messages, queue
                    # Nothing came: re-check the cached row (the queue may be gone, or have
                    # a wait time or redrive policy now) before answering.
                    fresh = catalog.get(conn, name, fresh=True)
                    if fresh == queue:
                        return messages, queue
        with db.write() as conn:
            # A FIFO receive on the broker's own connection reads the engine's commits_elsewhere first:
            # the catalog's check and the in-flight count may be skipped by it (queue_rows, in_flight).
            mark = (
                in_flight.mark(conn) if known is not None and known.fifo and self._remembers(conn) else None
            )
            queue = catalog.get(conn, name, fresh=True, mark=mark)
            claimed = self._claim(
                conn, queue, limit, visibility_timeout, attempt_id, wait_time, virtual, mark
            )
            return claimed, queue

    def _remembers(self, conn: Connection) -> bool:
        """Is ``conn`` the broker's own connection, in its own transaction (see ``in_flight``)?"""
        return self._remember_in_flight and conn is self._db.conn  # not a group's, nor an application's

    def _claim(
        self,
        conn: Connection,
        queue: QueueConfig,
        limit: int,
        visibility_timeout: int | None,
        attempt_id: str | None,
        wait_time: int | None,
        virtual: str | None = None,
        mark: int | None = None,
    ) -> list[Message]:
        """``mark``: ``in_flight.mark``, if read in this transaction."""
        if queue.sealed:  # the consumer's own trouble first: nothing is claimed if it has no keys
            self._reader.sealer.require_keys(queue)
        now = self._clock_ms()
        if queue.fifo:  # exact in this write transaction; asked before it writes anything (in_flight)
            limit = in_flight.room(conn, queue, now, limit, remember=self._remembers(conn), known=mark)
        self._sweeper.maybe_sweep(conn, queue, now)
        target = self._dead_letters.target(conn, queue)
        if virtual is not None:
            validation.virtual_host(queue.name, queue.fifo)
        if queue.fifo:
            timeout = queue.visibility_timeout if visibility_timeout is None else visibility_timeout
            messages: list[Message] = []
            if limit > 0:
                due, counters, reader = now + timeout * 1000, self._counters, self._reader
                messages = _claim_fifo(conn, queue, limit, due, now, attempt_id, target, counters, reader)
            in_flight.claimed(conn, queue, len(messages))
        else:
            messages = claim_standard(
                conn, queue, limit, visibility_timeout, now, target, self._counters, virtual, self._reader
            )
        if messages:
            self._counters.add(queue.name, now, RECEIVED, len(messages))
        elif in_flight_count(conn, queue, now) >= queue.in_flight_limit:
            if _wait_of(queue, wait_time) > 0:
                return []  # a long poll waits instead
            raise OverLimit(
                f"queue {queue.name!r} has reached its limit of {queue.in_flight_limit} messages in flight; "
                "delete or release messages (change visibility to 0) first, or long-poll"
            )
        return messages

    def _look(self, queue: QueueConfig, virtual: str | None, limit: int) -> tuple[int, int | None]:
        """A cheap read for a waiting room: how many could a claim find now (up to ``limit``),
        and when the next delayed or in-flight one becomes visible (broker clock, ms)."""
        params = {"queue_id": queue.id, "now": self._clock_ms(), "limit": limit, "virtual": virtual}
        look = _LOOK_FIFO if queue.fifo else _LOOK_STANDARD[virtual is not None]
        with self._db.statement() as conn:
            ready, next_at, exists = conn.execute(look, params).fetchone()
        return (ready, next_at) if exists else (limit, None)


def _wait_of(queue: QueueConfig, wait_time: int | None) -> int:
    """The seconds a receive may wait: its own wait time, else the queue's ReceiveWaitTimeSeconds."""
    return queue.receive_wait_time if wait_time is None else wait_time


def _needs_transaction(queue: QueueConfig) -> bool:
    """Does a receive from ``queue`` need a write transaction (not the one claim statement)?"""
    return queue.fifo or queue.dead_letter_queue is not None or queue.sealed or queue.grouped


def _claim_fifo(
    conn: Connection,
    queue: QueueConfig,
    limit: int,
    visible_at: int,
    now: int,
    attempt_id: str | None,
    target: QueueConfig | None,
    counters: Counters,
    reader: MessageReader,
) -> list[Message]:
    if attempt_id is not None:
        replayed = fifo.replay_attempt(conn, queue, attempt_id, visible_at, now, reader)
        if replayed is not None:
            return replayed
    cutoff = expired_before(queue.retention_period, now)
    if limit == 1 and attempt_id is None:
        received = fifo.claim_first_head(conn, queue, visible_at, now, cutoff, reader)
        if received:
            history.record(
                conn, queue, now, history.RECEIVED, [(m.message_id, m.receive_count) for m in received]
            )
            return received
    chosen, to_dead_letter, stale = fifo.choose(conn, queue, limit, now, cutoff, target is not None)
    if to_dead_letter and target is not None:
        dead = [row_id for row_id, _ in to_dead_letter]
        relocation.move(conn, relocation.Kind.DEAD_LETTER, queue, target, dead, now, counters, reader.sealer)
    received = fifo.claim(conn, queue, chosen, visible_at, now, reader)
    history.record(conn, queue, now, history.RECEIVED, [(m.message_id, m.receive_count) for m in received])
    fifo.refresh_groups(conn, queue.id, stale - {group for _, group in chosen})
    if attempt_id is not None:
        fifo.record_attempt(
            conn, queue.id, attempt_id, received, [row_id for row_id, _ in chosen], visible_at, now
        )
    return received
