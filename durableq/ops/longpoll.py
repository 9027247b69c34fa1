"""Waiting long polls: one look at a queue per change, however many receives wait on it.

A receive that found nothing waits as a :class:`Waiter` in its queue's
:class:`Room`.  When the change watcher of the file reports a commit, or the
next delayed or in-flight message of the queue becomes visible, the room looks
once (how many messages are ready, when the next one will be) and admits just
enough waiters to take what is ready, oldest first; the others keep waiting.
An admitted waiter claims (``durableq.ops.receive``) and either returns with
messages or comes back to the line.  So 2,000 waiting receives cost one query
per commit, not 2,000, and a message wakes one receive, not all of them.

Every room and waiter state changes under one lock; the looks and timers run
in the watcher thread.  A waiter is a thread's event (:class:`ThreadWaiter`) or
an asyncio event of a loop, set through ``call_soon_threadsafe``
(:class:`AsyncWaiter`): the waiting itself holds no thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import Callable

from .. import limits
from ..engines.watch import TimerHandle, Watcher
from ..errors import DurableQError
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

#: A room's look: (messages or groups ready now, up to the limit given; when the next is due, broker ms).
#: Its arguments: the queue, the virtual queue of it (None for the queue itself), the limit.
Look = Callable[[QueueConfig, str | None, int], tuple[int, int | None]]


class Waiter:
    """One waiting receive.  ``capacity`` is how many messages it would take."""

    __slots__ = ("admitted", "capacity", "room")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.admitted = False
        self.room: Room | None = None

    def wake(self) -> None:
        raise NotImplementedError


class ThreadWaiter(Waiter):
    """A waiter that blocks its thread on an event."""

    __slots__ = ("_event",)

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def wait(self, timeout: float) -> None:
        self._event.wait(timeout)
        self._event.clear()  # a wake-up after this is kept for the next wait


class AsyncWaiter(Waiter):
    """A waiter of an asyncio loop: waiting holds no thread; the watcher sets it thread-safely."""

    __slots__ = ("_event", "_loop")

    def __init__(self, capacity: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(capacity)
        self._loop = loop
        self._event = asyncio.Event()

    def wake(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._event.set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    async def wait(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
        self._event.clear()


class Room:
    """The waiters of one queue: those in line, and those admitted and looking."""

    __slots__ = ("check_pending", "line", "looking", "queue", "timer", "timer_at", "virtual")

    def __init__(self, queue: QueueConfig, virtual: str | None) -> None:
        self.queue = queue
        self.virtual = virtual  # the waiters of a virtual queue of ``queue`` have a room of their own
        self.line: dict[Waiter, None] = {}  # insertion-ordered: the oldest waiter first
        self.looking: dict[Waiter, None] = {}
        self.check_pending = False
        self.timer: TimerHandle | None = None
        self.timer_at = 0  # broker ms the timer is for

    def __bool__(self) -> bool:
        return bool(self.line or self.looking)


class Rooms:
    """The rooms of one broker, fed by the change watcher of its file."""

    def __init__(
        self, watcher: Callable[[], Watcher], look: Look, clock_ms: Callable[[], int], real_clock: bool
    ) -> None:
        self._watcher_of = watcher
        self._look = look
        self._clock_ms = clock_ms
        self._real_clock = real_clock
        self._lock = threading.Lock()
        self._rooms: dict[tuple[int, str | None], Room] = {}  # by (queue id, virtual queue)
        self._watch: Watcher | None = None
        self._closed = False
        self._orphans: list[Waiter] = []
        self._looking = threading.Lock()  # held while a look reads the file (close() waits for it)
        _all_rooms.add(self)

    def _forked(self) -> None:
        # In a forked child the waiters (the parent's threads) and the watcher thread did not come
        # along, and a lock one of them held would stay held: start afresh.
        self._lock = threading.Lock()
        self._looking = threading.Lock()
        self._rooms = {}
        self._watch = None
        self._orphans = []

    def generation(self) -> int:
        """Read before looking at the queue: if it moved when the waiter comes back, something committed."""
        return self._watcher().generation

    def _watcher(self) -> Watcher:
        if self._watch is None:
            self._watch = self._watcher_of()
        return self._watch

    # -- the waiting receive's side (any thread) -----------------------------------

    def join(self, waiter: Waiter, queue: QueueConfig, virtual: str | None = None) -> None:
        """Wait in the room of ``queue`` (or of its virtual queue ``virtual``); the room looks at once
        (the receive's own look is already old)."""
        watch = self._watcher()
        with self._lock:
            if self._closed:
                waiter.admitted = True  # its next look fails with "closed" at once
                waiter.wake()
                return
            if not self._rooms:
                watch.subscribe(self._changed)
            room = self._rooms.get((queue.id, virtual))
            if room is None:
                room = self._rooms[queue.id, virtual] = Room(queue, virtual)
            room.queue = queue
            waiter.room = room
            waiter.admitted = False
            room.line[waiter] = None
            self._request_check(room)

    def admitted(self, waiter: Waiter) -> bool:
        """Was the waiter admitted since it last asked?  If so it must look, then come back or leave."""
        with self._lock:
            admitted, waiter.admitted = waiter.admitted, False
            return admitted

    def back(self, waiter: Waiter, queue: QueueConfig, seen: int) -> None:
        """An admitted waiter found nothing: back in line; if anything committed while it looked, look again.

        ``seen`` is the :meth:`generation` read before it looked.
        """
        room = waiter.room
        if room is not None and room.queue.id != queue.id:  # the queue was deleted and created again
            self.leave(waiter)
            self.join(waiter, queue, room.virtual)
            return
        with self._lock:
            if room is None or self._closed:
                waiter.admitted = True
                waiter.wake()
                return
            room.looking.pop(waiter, None)
            room.line[waiter] = None
            if self._watcher().generation != seen:
                self._request_check(room)

    def leave(self, waiter: Waiter) -> None:
        """The receive ends (messages, deadline, error or cancellation)."""
        with self._lock:
            room = waiter.room
            waiter.room = None
            if room is None:
                return
            room.line.pop(waiter, None)
            was_looking = room.looking.pop(waiter, None) is not None
            if was_looking and room.line:
                # What it was let in for may still be there (it took less, or failed): look again.
                self._request_check(room)
            if not room and self._rooms.get((room.queue.id, room.virtual)) is room:
                del self._rooms[room.queue.id, room.virtual]
                if room.timer is not None:
                    room.timer.cancel()
                if not self._rooms and self._watch is not None:
                    self._watch.unsubscribe(self._changed)

    def close(self) -> None:
        """The broker closes: stop listening and looking (a look running now is waited for).

        Waiters keep waiting until :meth:`release` once the file is closed: woken
        earlier, they could race the connections being closed.
        """
        with self._lock:
            self._closed = True
            rooms, self._rooms = list(self._rooms.values()), {}
            for room in rooms:
                self._orphans.extend([*room.line, *room.looking])
                if room.timer is not None:
                    room.timer.cancel()
        if self._watch is not None:
            self._watch.unsubscribe(self._changed)
        with self._looking:
            pass  # a look that started before the close has ended

    def release(self) -> None:
        """Wake every waiter of a closed broker: its next look fails with "the broker is closed"."""
        with self._lock:
            orphans, self._orphans = self._orphans, []
            for waiter in orphans:
                waiter.admitted = True
                waiter.wake()

    def waiting(self) -> int:
        """How many receives wait now (for the endpoint's health and the benchmark)."""
        with self._lock:
            return sum(len(room.line) + len(room.looking) for room in self._rooms.values())

    # -- the watcher thread's side --------------------------------------------------

    def _request_check(self, room: Room) -> None:
        # Under the lock.  Several requests before the watcher gets to it make one look.
        if not room.check_pending:
            room.check_pending = True
            self._watcher().call_soon(lambda: self._check(room))

    def _changed(self, generation: int) -> None:
        with self._lock:
            rooms = [room for room in self._rooms.values() if room.line]
            for room in rooms:
                room.check_pending = True
        for room in rooms:
            self._check(room)

    def _check(self, room: Room) -> None:
        with self._lock:
            room.check_pending = False
            if not room.line or self._rooms.get((room.queue.id, room.virtual)) is not room:
                return
            queue = room.queue
            wanted = sum(w.capacity for w in room.line) + sum(w.capacity for w in room.looking)
        with self._looking:
            if self._closed:
                return
            try:
                ready, next_at = self._look(queue, room.virtual, wanted)
            except DurableQError as exc:  # busy: look again a little later
                log.debug("a long-poll look at %s failed: %s", queue.name, exc)
                self._watcher().call_later(limits.LONG_POLL_RETRY, lambda: self._check(room))
                return
        with self._lock:
            budget = ready - sum(w.capacity for w in room.looking)
            while budget > 0 and room.line:
                waiter = next(iter(room.line))
                del room.line[waiter]
                room.looking[waiter] = None
                waiter.admitted = True
                waiter.wake()
                budget -= waiter.capacity
            if room.line and next_at is not None:
                self._schedule(room, next_at)

    def _schedule(self, room: Room, at: int) -> None:
        """Look again when the broker clock reaches ``at`` (under the lock)."""
        if room.timer is not None and not room.timer.cancelled and room.timer_at <= at:
            return  # an earlier look is already due
        if room.timer is not None:
            room.timer.cancel()
        if self._real_clock:
            delay = (at - self._clock_ms()) / 1000 + limits.LONG_POLL_TIMER_MARGIN
        else:
            # A clock the caller controls can jump: look at it often instead of sleeping until then.
            delay = limits.LONG_POLL_CLOCK_INTERVAL
        room.timer_at = at
        room.timer = self._watcher().call_later(delay, lambda: self._timer(room))

    def _timer(self, room: Room) -> None:
        with self._lock:
            room.timer = None
        self._check(room)


_all_rooms: weakref.WeakSet[Rooms] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for rooms in list(_all_rooms):
        rooms._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
