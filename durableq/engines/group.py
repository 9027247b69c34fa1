"""Group commit: the writes of one process that queue up behind a transaction share the next one.

With durability FULL every commit is an fsync, and SQLite lets one writer in
at a time, so threads that each write one message at a time get, together,
about what one thread gets.  The gate below changes that without changing
what a caller sees:

* A write that finds no other write of this process in progress runs alone,
  exactly as before: its own transaction (or a single autocommit statement).
* Writes that arrive while one is in progress wait in line.  When it ends,
  everyone in line at that moment forms a *batch*: one transaction, each
  member's work in its own ``SAVEPOINT``, run by the member's own thread on
  the batch's connection when its turn comes (in arrival order), then one
  ``COMMIT`` by the last member.  A line of one just runs alone.
* A member whose work raises is rolled back to its savepoint: the error is
  its alone.  A member returns only after the ``COMMIT`` that holds its work,
  so an acknowledged write is exactly as durable as it was alone; if that
  ``COMMIT`` fails, every member whose work it held gets the error.

The gate only orders the writers of this process; other processes are kept
out by SQLite's write lock, as before.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class GroupStats:
    """What the gate did since the file was opened (for tests and benchmarks)."""

    alone: int = 0
    """Writes that ran in a transaction of their own."""
    batches: int = 0
    """Shared transactions (of two or more writes each)."""
    grouped: int = 0
    """Writes that ran in a shared transaction."""


class _Signal:
    """A one-shot wake-up for one waiting thread: a lock taken at birth, released to wake it
    (cheaper than a ``threading.Event``, which is a condition variable; a batch wakes a thread
    twice per write)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        self._lock.release()

    def wait(self) -> None:
        self._lock.acquire()


class Member:
    """One write that waited in line (see :meth:`Gate.enter`)."""

    __slots__ = ("batch", "done", "error", "turn")

    def __init__(self) -> None:
        self.turn = _Signal()
        self.done = _Signal()
        self.batch: _Batch | None = None
        self.error: BaseException | None = None


class _Batch:
    """The writes that share one transaction, in their order of turns."""

    __slots__ = ("conn", "held", "members")

    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self.conn: sqlite3.Connection | None = None  # the connection of the open transaction
        self.held: list[Member] = []  # whose work the open transaction holds


class Gate:
    """Orders the writes of one process to one file and groups those that wait (see the module)."""

    def __init__(
        self,
        begin: Callable[[sqlite3.Connection], None],
        commit: Callable[[sqlite3.Connection], None],
        translate: Callable[[BaseException], BaseException],
    ) -> None:
        """``begin`` and ``commit`` open and end a shared transaction, raising durableq errors;
        ``translate`` gives the durableq error for an exception of a member's work."""
        self._begin = begin
        self._commit = commit
        self._translate = translate
        self._lock = threading.Lock()
        self._busy = False
        self._line: list[Member] = []
        self.stats = GroupStats()

    @property
    def waiting(self) -> int:
        """How many writes wait in line (not yet in a batch)."""
        return len(self._line)

    def reset(self) -> None:
        """Forget every writer (in a forked child: its parent's threads did not come along)."""
        self._lock = threading.Lock()
        self._busy = False
        self._line = []

    def enter(self) -> Member | None:
        """Take the gate.  None: the caller writes alone and calls :meth:`leave` when done.
        A member: the caller's turn in a batch has come; it writes inside :meth:`turn`."""
        with self._lock:
            if not self._busy:
                self._busy = True
                self.stats.alone += 1
                return None
            member = Member()
            self._line.append(member)
        member.turn.wait()
        if member.batch is None and member.error is None:
            return None  # a line of one: it holds the gate and writes alone
        return member

    def leave(self) -> None:
        """The write in progress is over: the writes in line form the next batch, or the gate is free."""
        with self._lock:
            line, self._line = self._line, []
            if not line:
                self._busy = False
                return
            if len(line) == 1:
                self.stats.alone += 1
            else:
                self.stats.batches += 1
                self.stats.grouped += len(line)
        if len(line) == 1:
            line[0].turn.set()
            return
        batch = _Batch(line)
        for member in line:
            member.batch = batch
        line[0].turn.set()

    @contextmanager
    def turn(self, member: Member, own: Callable[[], sqlite3.Connection]) -> Iterator[sqlite3.Connection]:
        """Run a member's work in its savepoint of the batch's transaction, opened on this
        thread's connection ``own()`` if none is open; end when that transaction committed."""
        if member.error is not None:
            raise member.error  # the batch could not open its transaction (see _fail_rest)
        batch = member.batch
        assert batch is not None
        if batch.conn is None:
            try:
                conn = own()
                self._begin(conn)
            except BaseException as exc:
                self._fail_rest(batch, member, exc)
                raise
            batch.conn = conn
        conn = batch.conn
        try:
            conn.execute("SAVEPOINT member")
            yield conn
            conn.execute("RELEASE member")
        except BaseException as exc:
            self._undo(batch, conn, exc)
            self._pass_turn(batch, member)
            error = self._translate(exc)
            if error is exc:
                raise
            raise error from exc
        batch.held.append(member)
        self._pass_turn(batch, member)
        member.done.wait()
        if member.error is not None:
            raise member.error

    def _undo(self, batch: _Batch, conn: sqlite3.Connection, exc: BaseException) -> None:
        """Roll back one member's work.  If SQLite ended the whole transaction instead (some
        errors do), the members whose work it held fail with the same error."""
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK TO member")
                conn.execute("RELEASE member")
                return
            except sqlite3.Error:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        self._end(batch, self._translate(exc))

    def _pass_turn(self, batch: _Batch, member: Member) -> None:
        members = batch.members
        after = members.index(member) + 1
        if after < len(members):
            members[after].turn.set()
            return
        # The last member commits for everyone, then hands the gate to the next batch.
        error: BaseException | None = None
        if batch.conn is not None and batch.conn.in_transaction:
            try:
                self._commit(batch.conn)
            except BaseException as exc:  # noqa: BLE001 - every member must wake, whatever the commit raised
                error = exc
        self._end(batch, error)
        self.leave()

    def _end(self, batch: _Batch, error: BaseException | None) -> None:
        """The open transaction ended, committed or failed with ``error``: wake the members it held."""
        for held in batch.held:
            # Each thread raises its own copy: one exception object must not collect the
            # tracebacks of several threads.
            held.error = None if error is None else copy.copy(error)
            held.done.set()
        batch.held = []
        batch.conn = None

    def _fail_rest(self, batch: _Batch, member: Member, exc: BaseException) -> None:
        # The shared transaction could not start (say the file stayed locked by another
        # process past the busy timeout): the members after this one would each wait as long
        # again, one after another, so they fail at once with the same error.
        rest = batch.members[batch.members.index(member) + 1 :]
        for other in rest:
            other.error = copy.copy(exc)
            other.turn.set()
        batch.members = batch.members[: len(batch.members) - len(rest)]
        self._end(batch, exc)
        self.leave()
