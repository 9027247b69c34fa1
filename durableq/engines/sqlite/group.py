"""Group commit: the writes of one process that queue up behind a transaction share the next one.

With durability FULL every commit is an fsync, and SQLite lets one writer in
at a time, so threads that each write one message at a time get, together,
about what one thread gets.  The gate below changes that without changing
what a caller sees:

* A write that finds no other write of this process in progress runs alone,
  exactly as before: its own transaction (or a single autocommit statement)
  on its thread's own connection, which no other thread uses meanwhile.
* Writes that arrive while one is in progress wait in line.  When it ends,
  everyone in line at that moment forms a *batch*: one transaction, each
  member's work in its own ``SAVEPOINT``, run by the member's own thread when
  its turn comes (in arrival order), then one ``COMMIT`` by the last member.
  A line of one just runs alone.
* A batch belongs to the gate, never to a member: its transaction runs on the
  gate's connection (the database's, see ``begin``), which is no thread's
  own.  Only the member whose turn it is uses it; what a member does before or
  after its turn (a read, another write, its thread ending, a fork) happens on
  its thread's own connection and cannot touch the batch.  So a member that
  fails and returns early, while the batch goes on, is just another reader.
* A member whose work raises is rolled back to its savepoint: the error is
  its alone.  If SQLite ends the whole transaction instead (a full disk, an
  I/O error), the members whose work it held fail with that error, and the
  next member begins a new transaction.  A member returns only after the
  ``COMMIT`` that holds its work, so an acknowledged write is exactly as
  durable as it was alone; if that ``COMMIT`` fails, every member whose work
  it held gets the error.
* Every member is woken on every path: a batch whose transaction cannot
  begin fails the members after at once; a write interrupted while it waits
  (``KeyboardInterrupt``) still passes its turn on; the gate raises durableq
  errors only, never the driver's.

The gate only orders the writes of this process; other processes are kept
out by SQLite's write lock, as before.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ...errors import DatabaseError
from ..base import GroupStats
from .connection import SqliteConnection


class _Signal:
    """A one-shot wake-up for one waiting thread: a lock taken at birth, released to wake it
    (cheaper than a ``threading.Event``, which is a condition variable; a batch wakes a thread
    twice per write)."""

    __slots__ = ("_lock", "fired")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.fired = False  # set (before the wake-up): an interrupted waiter can tell

    def set(self) -> None:
        self.fired = True
        self._lock.release()

    def wait(self) -> None:
        self._lock.acquire()


class Member:
    """One write that waited in line (see :meth:`Gate.enter`)."""

    __slots__ = ("alone", "batch", "done", "error", "turn")

    def __init__(self, *, alone: bool = False) -> None:
        self.alone = alone  # never in a batch (see Gate.enter_alone)
        self.turn = _Signal()
        self.done = _Signal()
        self.batch: _Batch | None = None
        self.error: BaseException | None = None


class _Batch:
    """The writes that share one transaction, in their order of turns."""

    __slots__ = ("conn", "held", "members")

    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self.conn: SqliteConnection | None = None  # the connection of the open transaction
        self.held: list[Member] = []  # whose work the open transaction holds


class Gate:
    """Orders the writes of one process to one file and groups those that wait (see the module)."""

    def __init__(
        self,
        begin: Callable[[], SqliteConnection],
        commit: Callable[[SqliteConnection], None],
        translate: Callable[[BaseException], BaseException],
    ) -> None:
        """``begin()`` opens a shared transaction on the gate's connection (one that belongs to
        no thread) and returns that connection; ``commit`` ends it; both raise durableq errors.
        ``translate`` gives the durableq error for an exception of a member's work."""
        self._begin = begin
        self._commit = commit
        self._translate = translate
        self._lock = threading.Lock()
        self._busy = False
        self._line: list[Member] = []
        self._when_free: Callable[[], None] | None = None
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
        self._when_free = None

    def when_free(self, action: Callable[[], None]) -> None:
        """Run ``action`` once no write holds the gate: now, or when the writes under way are
        over (closing the gate's connection must not pull it from under a batch)."""
        with self._lock:
            if self._busy:
                self._when_free = action
                return
        action()

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
        try:
            member.turn.wait()
        except BaseException:  # interrupted while it waited (KeyboardInterrupt): it gives up its turn
            self._give_up(member)
            raise
        if member.batch is None and member.error is None:
            return None  # a line of one: it holds the gate and writes alone
        return member

    def enter_alone(self) -> None:
        """Take the gate for a transaction that is never part of a batch (the application's own:
        ``Broker.transaction``, which runs for as long as the application's block does): wait until
        the writes under way and in line before it are done, then hold the gate, alone, until
        :meth:`leave`.  The writes that come meanwhile wait in line, and batch after it."""
        with self._lock:
            if not self._busy:
                self._busy = True
                self.stats.alone += 1
                return
            member = Member(alone=True)
            self._line.append(member)
        try:
            member.turn.wait()
        except BaseException:
            self._give_up(member)
            raise

    def leave(self) -> None:
        """The write in progress is over: the writes in line form the next batch, or the gate is free."""
        free = None
        with self._lock:
            # The line up to the first write that must run alone forms the batch (that one alone,
            # when it is first); the rest waits for the next turn of the gate.
            line = self._line
            cut = next((i for i, waiting in enumerate(line) if waiting.alone), len(line))
            line, self._line = line[: max(cut, 1)], line[max(cut, 1) :]
            if not line:
                self._busy = False
                free, self._when_free = self._when_free, None
            elif len(line) == 1:
                self.stats.alone += 1
            else:
                self.stats.batches += 1
                self.stats.grouped += len(line)
        if not line:
            if free is not None:
                free()
            return
        if len(line) > 1:
            batch = _Batch(line)
            for member in line:
                member.batch = batch
        line[0].turn.set()

    @contextmanager
    def turn(self, member: Member) -> Iterator[SqliteConnection]:
        """Run a member's work in its savepoint of the batch's transaction (begun on the gate's
        connection if none is open); end when that transaction committed."""
        if member.error is not None:
            raise member.error  # the batch could not open its transaction (see _fail_rest)
        batch = member.batch
        assert batch is not None
        conn = batch.conn
        if conn is None:  # the first member, or the first after SQLite ended the transaction
            try:
                conn = batch.conn = self._begin()
            except BaseException as exc:  # a durableq error (begin translates), or an interrupt
                self._fail_rest(batch, member, exc)
                raise
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

    def _undo(self, batch: _Batch, conn: SqliteConnection, exc: BaseException) -> None:
        """Roll back one member's work.  If SQLite ended the whole transaction instead (some
        errors do), or it cannot be rolled back to the savepoint, the transaction is over: the
        members whose work it held fail with the error, and the next member begins anew."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK TO member")
                conn.execute("RELEASE member")
                return
        except sqlite3.Error:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # ``begin`` sees the transaction still open and starts over (see sqlite.py)
        self._end(batch, self._for_others(exc))

    def _pass_turn(self, batch: _Batch, member: Member) -> None:
        members = batch.members
        after = members.index(member) + 1
        if after < len(members):
            members[after].turn.set()
            return
        # The last member commits for everyone, then hands the gate to the next batch.
        error: Exception | None = None
        interrupted: BaseException | None = None
        conn = batch.conn
        if conn is not None:
            try:
                self._commit(conn)
            except Exception as exc:  # noqa: BLE001 - every member must wake, whatever the commit raised
                error = self._for_others(exc)
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt: the others wake first
                interrupted = exc
                error = self._interrupted_commit(conn, exc)
        self._end(batch, error)
        self.leave()
        if interrupted is not None:
            raise interrupted

    def _interrupted_commit(self, conn: SqliteConnection, exc: BaseException) -> Exception | None:
        """The members' error when the commit was interrupted: none if it went through."""
        try:
            if not conn.in_transaction:
                return None
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        return self._for_others(exc)

    def _end(self, batch: _Batch, error: Exception | None) -> None:
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
        error = self._for_others(exc)
        rest = batch.members[batch.members.index(member) + 1 :]
        for other in rest:
            other.error = copy.copy(error)
            other.turn.set()
        batch.members = batch.members[: len(batch.members) - len(rest)]
        self._end(batch, error)
        self.leave()

    def _give_up(self, member: Member) -> None:
        """A write interrupted while it waited: out of the line, or, if its batch has called it
        already, its turn taken when it comes and passed on unused (the others must not wait)."""
        with self._lock:
            if member in self._line:
                self._line.remove(member)
                return
        while not member.turn.fired:  # it comes once the members before it are done
            try:
                member.turn.wait()
            except BaseException:  # noqa: BLE001 - interrupted again: still, the turn must pass
                pass
        if member.error is not None:
            return  # its batch could not begin: nothing to pass
        if member.batch is None:
            self.leave()  # a line of one: it held the gate
        else:
            self._pass_turn(member.batch, member)

    def _for_others(self, exc: BaseException) -> Exception:
        """The error of members whose work was not committed because of a failure not theirs."""
        error = self._translate(exc)
        if isinstance(error, DatabaseError):
            return error
        return DatabaseError(
            f"the write was not committed: the transaction it shared with other writes of this process "
            f"ended early ({type(exc).__name__}: {exc}); it can be retried"
        )
