"""The mix's transactions: sends, receives and deletes on the checked queues inside
``broker.transaction()`` (durableq's own connection) or inside the application's own ``sqlite3`` /
``psycopg`` connection joined to it, each beside a row of the application's, committed or rolled back.

How the journal tells the oracle what a transaction promised:

- the commit or rollback is drawn *before* the transaction begins.  A transaction drawn to roll back
  journals nothing of its sends (their bodies are nobody's: one stored or received is a PHANTOM), nor
  of its receives (so a receive that left a trace shows as a gap in the message's history), nor of its
  deletes: after the rollback each handle it deleted is deleted again, journaled, outside any
  transaction, and must still be valid (a rolled-back delete leaves the message in flight);
- a transaction drawn to commit journals its sends' and deletes' intents before it begins, and their
  results (``sent``, ``recv``, ``deleted``) only once its commit returned: a kill or a failure in
  between leaves intents the checker reads as "maybe", and nothing acknowledged early.

The application's row (table ``hx_app``, one per send, keyed by the body) is checked at once: after a
commit it is there, after a rollback it is not.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import durableq

from .. import store
from . import layout

#: What a transaction in the mix may meet: the busy timeout of its broker or of the application's
#: connection (one process's broker waits 1 ms).
EXPECTED = ["DatabaseLocked", "RequestTimeout"]


class Rollback(Exception):
    """Raised inside a transaction drawn to roll back."""


def _table(db: str) -> str:
    return "public.hx_app" if store.on_postgres(db) else "hx_app"


def ensure_table(db: str) -> None:
    """The application's table, made once (by whichever process comes first)."""
    statement = f"CREATE TABLE IF NOT EXISTS {_table(db)} (body TEXT PRIMARY KEY, queue TEXT NOT NULL)"
    if store.on_postgres(db):
        import psycopg

        try:
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute(statement)
        except psycopg.errors.UniqueViolation:
            pass  # another process made it at the same moment
        return
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        conn.execute(statement)
    finally:
        conn.close()


def _app_rows(db: str, bodies: list[str]) -> int:
    """How many of ``bodies`` have their application row (read outside any transaction)."""
    marks = ", ".join("?" for _ in bodies)
    statement = f"SELECT count(*) FROM {_table(db)} WHERE body IN ({marks})"
    if store.on_postgres(db):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            (count,) = conn.execute(statement.replace("?", "%s"), bodies).fetchone()  # type: ignore[misc]
            return int(count)
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        (count,) = conn.execute(statement, bodies).fetchone()
        return int(count)
    finally:
        conn.close()


@contextmanager
def _transaction(hand: Any, form: str) -> Iterator[durableq.Transaction]:
    """A transaction of ``form``, committed when the block ends, rolled back by an exception."""
    if form == "own":
        with hand.broker.transaction() as tx:
            yield tx
        return
    db = hand.proc.db
    if store.on_postgres(db):
        import psycopg

        conn: Any = psycopg.connect(db)
    else:
        conn = sqlite3.connect(db, timeout=10)
    try:
        with hand.broker.transaction(conn) as tx:
            yield tx
        try:
            conn.commit()
        except Exception as exc:  # the driver's own error, as the application meets it
            if "locked" in str(exc) or "busy" in str(exc):
                raise durableq.DatabaseLocked(f"the application's commit: {exc}") from exc
            raise
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()


def one(hand: Any) -> None:
    """One transaction of the mix (see the module)."""
    if not getattr(hand.proc, "hx_app_made", False):
        ensure_table(hand.proc.db)
        hand.proc.hx_app_made = True
    rng = hand.rng
    form = rng.choice(["own", "joined"])
    commit = rng.random() < 0.7
    op = f"tx.{form}.{'commit' if commit else 'rollback'}"
    journal = hand.journal
    name = rng.choice(layout.CHECKED)
    queue = hand.broker.get_queue(name)
    sends = []
    for _ in range(rng.randint(0, 3)):
        body = hand.body(name) + ".tx"
        sends.append((body, hand.options(name, body)))
    held = hand.held[name]
    deletes = [held.pop(rng.randrange(len(held))) for _ in range(min(len(held), rng.randint(0, 2)))]
    for handle in deletes:
        hand._retire(name, handle)
    receive = rng.random() < 0.5
    visibility = rng.choice([1, 2, 3])
    if commit:
        for body, options in sends:
            journal.write("send-intent", q=name, body=body, g=options.get("group_id"))
        for handle in deletes:
            journal.write("del-intent", q=name, id=None, h=handle, b=time.time())
    results: list[Any] = []
    received: list[durableq.Message] = []
    before = time.time()

    def run() -> bool:
        """True: committed."""
        try:
            with _transaction(hand, form) as tx:
                for body, options in sends:
                    tx.execute(
                        f"INSERT INTO {_table(hand.proc.db)} (body, queue) VALUES (?, ?)", (body, name)
                    )
                    results.append(queue.send(body, transaction=tx, **options))
                if receive:
                    received.extend(
                        queue.receive(rng.randint(1, 5), visibility_timeout=visibility, transaction=tx)
                    )
                if len(deletes) > 1 and rng.random() < 0.5:
                    if queue.delete_batch(deletes, transaction=tx).failed:
                        raise Rollback  # a late handle: nothing of this transaction may commit
                else:
                    for handle in deletes:
                        queue.delete(handle, transaction=tx)
                if not commit:
                    raise Rollback
        except Rollback:
            return False
        return True

    committed = hand.call(op, run, [*EXPECTED, "ReceiptHandleIsInvalid"])
    bodies = [body for body, _ in sends]
    if committed:
        after = time.time()
        for (body, options), result in zip(sends, results, strict=True):
            journal.write(
                "sent",
                q=name,
                body=body,
                g=options.get("group_id"),
                id=result.message_id,
                seq=result.sequence_number,
            )
        if received:
            journal.write(
                "recv",
                q=name,
                b=before,
                a=after,
                vt=visibility,
                m=[
                    [m.message_id, m.body, m.receipt_handle, m.receive_count, m.sequence_number, m.group_id]
                    for m in received
                ],
            )
        for handle in deletes:
            journal.write("deleted", q=name, id=None, h=handle, a=after)
        held.extend(message.receipt_handle for message in received)
        if bodies:
            stored = _app_rows(hand.proc.db, bodies)
            hand.check(op, stored == len(bodies), f"committed, but {stored} of the rows {bodies} stored")
        return
    if not commit and committed is False:  # rolled back as drawn (not cut short by an error)
        if bodies:
            stored = _app_rows(hand.proc.db, bodies)
            hand.check(op, stored == 0, f"rolled back, but {stored} of the rows {bodies} stored")
        for handle in deletes:  # a rolled-back delete leaves the message in flight, its handle valid
            hand.call("tx.delete_after_rollback", lambda h=handle: hand.checked[name].delete(h), judged=True)
