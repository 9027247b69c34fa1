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
"""

from __future__ import annotations

#: The advisory lock of durableq's writers (shared: one-statement writes; exclusive: the others).
WRITERS = 0x6475_7261_626C  # "durabl"
#: The advisory lock of a migration (one process migrates a database at a time).
MIGRATION = WRITERS + 1

#: A write of several statements: runs alone (as SQLite's ``BEGIN IMMEDIATE``).
BEGIN_WRITE = f"BEGIN; SELECT pg_advisory_xact_lock({WRITERS})"
#: A write of one statement (or a few that must commit together): runs beside the others like it.
BEGIN_CHANGE = f"BEGIN; SELECT pg_advisory_xact_lock_shared({WRITERS})"
#: What an operation inside a transaction it did not begin (``Broker.transaction``) takes first: the
#: writers' lock as its kind needs (exclusive for a write that runs alone, shared for a change), held
#: until the application's commit, as a transaction of its own would hold it until its own.
JOINED_WRITE = f"SELECT pg_advisory_xact_lock({WRITERS})"
JOINED_CHANGE = f"SELECT pg_advisory_xact_lock_shared({WRITERS})"
#: A read of several statements: one snapshot.
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

#: How a settled read begins, in this order on an idle connection: the writers' lock taken
#: exclusively for the session (:data:`SETTLED_BARRIER`), then the transaction, whose first statement
#: (where its snapshot is taken) releases the lock (:data:`SETTLED_BEGIN`).  If the second fails, the
#: connection may still hold the lock: close it.
SETTLED_BARRIER = f"SELECT pg_advisory_lock({WRITERS})"
SETTLED_BEGIN = f"{BEGIN_READ}; SELECT pg_advisory_unlock({WRITERS})"
