"""The writers' lock: how each kind of PostgreSQL transaction begins, and why.

SQLite lets one writer in at a time, and every rule of the operations was written against that.  On
PostgreSQL every durableq write holds one advisory lock, the *writers' lock*, from its ``BEGIN`` to its
end:

- one-statement writes (``Database.change``: a standard send, a claim, a delete, a visibility change)
  take it *shared*, so they run side by side; the claims pass over rows another claim holds
  (``FOR UPDATE SKIP LOCKED``);
- writes of several statements (``Database.write``: FIFO sends and receives, batches, queue changes,
  moves) take it *exclusively*: they run alone, as on SQLite, so what they read stays true until they
  commit;
- reads take neither (a read transaction is one ``REPEATABLE READ`` snapshot), except a *settled* read,
  which waits for the writes under way before it takes its snapshot.

Why a settled read: event ids come from a sequence as rows are written, and one-statement writes
commit side by side, so id N + 1 may commit before N.  A plain snapshot between the two commits shows
N + 1 without N, and a reader that resumes after N + 1 never sees N.

Why it is correct: a transaction that took an id holds the writers' lock until it has committed or
rolled back.  ``pg_advisory_lock`` (exclusive) waits until no transaction holds it and keeps new ones
out; PostgreSQL makes a commit visible to new snapshots before it releases the transaction's locks
(``ProcArrayEndTransaction`` comes before the locks' release in ``CommitTransaction``).  A
``REPEATABLE READ`` transaction takes its snapshot at the start of its first statement, here the one
that releases the lock: at that moment every id given so far belongs to a transaction that has ended
(it is in the snapshot, or was rolled back), and every id given later is higher.

The cost falls on readers: a settled read waits for the writes under way (as a write that runs alone
does), and writes that start meanwhile wait for it; the lock is released as soon as the snapshot is
taken, and no write pays anything when nobody reads.

**The listeners' lock: a write sends NOTIFY only when a long poll may be waiting.**  A ``NOTIFY``
is not free: its commit takes a lock of the whole database (PostgreSQL queues notifications in commit
order), so notifying writers commit one at a time, each waiting for the previous one's WAL flush.  A
process whose long polls listen (its change watcher's ``LISTEN`` connection) holds a second advisory
lock, the *listeners' lock*, shared, for as long as it listens; a write, just before its ``COMMIT``
and still holding the writers' lock, tries the listeners' lock exclusively for an instant: granted, no
one listens, and it lets go at once and commits without ``NOTIFY``; refused, it notifies (a refusal
for any other reason, another writer trying at the same instant, costs a needless ``NOTIFY``, never a
missed one).

Why no wake-up is lost: a listener registers by taking the writers' lock exclusively, then the
listeners' lock shared, then letting the writers' lock go (:attr:`Begins.listen`), after its
``LISTEN`` and before its waiters look at their queues.  A write that tried the listeners' lock before
the registration held the writers' lock then, so the registration waited for its commit, and the
waiters' first look sees its rows; a write that tries after it finds the lock held and notifies, and
the ``LISTEN`` was in effect by then.  A listener that dies lets go of its lock with its session.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

#: The advisory lock of a migration, one for the whole database (one process migrates it at a time,
#: whatever its schema: revision 0009 moves tables out of ``public``, which two schemas may race for).
#: Before revision 0009 it was also the writers' lock + 1, and still is: an older durableq migrating
#: the same database waits for this one.
MIGRATION = 0x6475_7261_626C + 1

#: A read of several statements: one snapshot.
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def writers_key(schema: str) -> int:
    """The writers' advisory lock of the durableq of ``schema``: advisory locks belong to the whole
    database, so each schema (each durableq installation) has its own, and the writers of one never
    wait for another's (64 bits of a hash: two schemas share one by a chance of 1 in 2**64)."""
    return _key("writers", schema)


@dataclass(frozen=True, slots=True)
class Begins:
    """How each kind of transaction of one schema's durableq begins."""

    #: The writers' lock (shared: one-statement writes; exclusive: the others).
    writers: int
    #: The listeners' lock (shared: by each process whose long polls listen; see above).
    listeners: int

    @property
    def write(self) -> str:
        """A write of several statements: runs alone (as SQLite's ``BEGIN IMMEDIATE``)."""
        return f"BEGIN; SELECT pg_advisory_xact_lock({self.writers})"

    @property
    def change(self) -> str:
        """A write of one statement (or a few that must commit together): runs beside the others."""
        return f"BEGIN; SELECT pg_advisory_xact_lock_shared({self.writers})"

    @property
    def joined_write(self) -> str:
        """What an operation inside a transaction it did not begin (``Broker.transaction``) takes
        first, when it must run alone: the writers' lock, exclusive, held until the application's
        commit, as a transaction of its own would hold it until its own."""
        return f"SELECT pg_advisory_xact_lock({self.writers})"

    @property
    def joined_change(self) -> str:
        """The same for an operation that runs beside others like it: the writers' lock, shared."""
        return f"SELECT pg_advisory_xact_lock_shared({self.writers})"

    @property
    def settled_barrier(self) -> str:
        """How a settled read begins, in this order on an idle connection: the writers' lock taken
        exclusively for the session (this), then the transaction, whose first statement (where its
        snapshot is taken) releases the lock (:attr:`settled_begin`).  If the second fails, the
        connection may still hold the lock: close it."""
        return f"SELECT pg_advisory_lock({self.writers})"

    @property
    def settled_begin(self) -> str:
        return f"{BEGIN_READ}; SELECT pg_advisory_unlock({self.writers})"

    @property
    def listen(self) -> str:
        """A listener's registration, on its ``LISTEN`` connection (autocommit), once it listens: after
        every write under way, the listeners' lock shared for the session.  If it fails part way, the
        session may hold either lock: close the connection."""
        return (
            f"SELECT pg_advisory_lock({self.writers}); SELECT pg_advisory_lock_shared({self.listeners}); "
            f"SELECT pg_advisory_unlock({self.writers})"
        )

    def notify_if_listening(self, channel: str, *, if_wrote: bool = False) -> str:
        """Sent just before a write's ``COMMIT``: ``NOTIFY`` on ``channel`` unless no one listens (the
        listeners' lock granted exclusively, and let go at once).  ``if_wrote``: and only if the
        transaction wrote rows (it has a transaction id then), for a statement sent with it, before
        its result says whether it changed any."""
        wrote = "WHEN txid_current_if_assigned() IS NULL THEN NULL " if if_wrote else ""
        return (
            f"SELECT CASE {wrote}WHEN pg_try_advisory_lock({self.listeners}) "
            f"THEN pg_advisory_unlock({self.listeners}) "
            f"ELSE (SELECT true FROM pg_notify('{channel}', '')) END"
        )


def _key(purpose: str, schema: str) -> int:
    digest = hashlib.sha256(f"durableq {purpose} {schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@lru_cache(maxsize=64)
def begins(schema: str) -> Begins:
    """How the transactions of the durableq of ``schema`` begin."""
    return Begins(writers_key(schema), _key("listeners", schema))
