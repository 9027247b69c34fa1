"""Broker.transaction: durableq's calls inside the application's transaction, on both engines and in
every form (durableq's own connection, the driver's, a SQLAlchemy Connection, an ORM Session)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.orm import Session

import durableq
from durableq import InvalidParameterValue, SendEntry
from tests.conftest import payload_dir, sql_rows, sql_run, until, until_long_polls_wait

FORMS = ("own", "driver", "core", "session")


class Rollback(Exception):
    """Raised by a test to roll its transaction back."""


def sqlalchemy_url(target: str) -> str:
    if target.startswith("postgresql://"):
        return target.replace("postgresql://", "postgresql+psycopg://", 1)
    return f"sqlite:///{target}"


class App:
    """The application's side: opens a transaction of one form, and commits or rolls it back as the
    application would (durableq's own form: by leaving its block, or by an exception)."""

    def __init__(self, form: str, target: str, broker: durableq.Broker) -> None:
        self.form = form
        self.target = target
        self.broker = broker
        self._engine: sqlalchemy.Engine | None = None

    @property
    def engine(self) -> sqlalchemy.Engine:
        if self._engine is None:
            self._engine = sqlalchemy.create_engine(sqlalchemy_url(self.target))
        return self._engine

    def driver(self) -> Any:
        if self.target.startswith("postgresql://"):
            import psycopg

            return psycopg.connect(self.target)
        return sqlite3.connect(self.target)

    @contextmanager
    def transaction(self, *, commit: bool = True) -> Iterator[durableq.Transaction]:
        """A transaction of this form; committed at the end of the block, or rolled back."""
        if self.form == "own":
            try:
                with self.broker.transaction() as tx:
                    yield tx
                    if not commit:
                        raise Rollback
            except Rollback:
                pass
            return
        if self.form == "driver":
            conn = self.driver()
            try:
                with self.broker.transaction(conn) as tx:
                    yield tx
                conn.commit() if commit else conn.rollback()
            finally:
                conn.close()
            return
        if self.form == "core":
            with self.engine.connect() as core:
                with self.broker.transaction(core) as tx:
                    yield tx
                core.commit() if commit else core.rollback()
            return
        with Session(self.engine) as session:
            with self.broker.transaction(session) as tx:
                yield tx
            session.commit() if commit else session.rollback()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


@pytest.fixture(params=FORMS)
def app(request: pytest.FixtureRequest, target: str, broker: durableq.Broker) -> Iterator[App]:
    make_orders(target)
    made = App(request.param, target, broker)
    try:
        yield made
    finally:
        made.close()


def make_orders(target: str) -> None:
    """The application's own table, beside durableq's."""
    key = "SERIAL" if target.startswith("postgresql://") else "INTEGER"
    sql_run(target, f"CREATE TABLE orders (id {key} PRIMARY KEY, note TEXT)")


def count(target: str, table: str) -> int:
    (n,) = sql_rows(target, f"SELECT count(*) FROM {table}")[0]
    return int(n)


def metrics_sent(target: str) -> int:
    (n,) = sql_rows(target, "SELECT coalesce(sum(sent), 0) FROM durableq_queue_metrics")[0]
    return int(n)


# -- send: visible at the commit, no trace after a rollback ---------------------------------------


def test_a_send_and_a_row_commit_together(app: App, target: str, queue: durableq.Queue) -> None:
    with app.transaction() as tx:
        tx.execute("INSERT INTO orders (note) VALUES (?)", ("order 1",))
        queue.send("ship order 1", transaction=tx)
        assert count(target, "durableq_messages") == 0  # another connection sees nothing yet
        assert count(target, "orders") == 0
    assert count(target, "orders") == 1
    assert [m.body for m in queue.receive(wait_time=0)] == ["ship order 1"]
    assert metrics_sent(target) == 1  # the counters were written in the transaction


def test_a_rollback_leaves_no_trace(app: App, target: str, broker: durableq.Broker) -> None:
    queue = broker.create_queue("kept", history=True)
    with app.transaction(commit=False) as tx:
        tx.execute("INSERT INTO orders (note) VALUES (?)", ("order 1",))
        queue.send("ship order 1", transaction=tx)
        queue.send_batch([SendEntry("a", "one"), SendEntry("b", "two")], transaction=tx)
    assert count(target, "orders") == 0
    assert count(target, "durableq_messages") == 0
    assert count(target, "durableq_message_events") == 0
    assert metrics_sent(target) == 0
    assert queue.receive(wait_time=0) == []


def test_history_and_batches_hold_inside(app: App, target: str, broker: durableq.Broker) -> None:
    queue = broker.create_queue("kept", history=True)
    with app.transaction() as tx:
        sent = queue.send("one", transaction=tx)
        result = queue.send_batch([SendEntry("a", "two"), SendEntry("b", "three")], transaction=tx)
    assert len(result.successful) == 2
    assert (queue.events()[0].event, queue.events()[0].message_id) == ("sent", sent.message_id)
    assert [e.event for e in queue.events()] == ["sent"] * 3
    assert sorted(m.body for m in queue.receive(max_messages=10, wait_time=0)) == ["one", "three", "two"]


# -- receive, delete, change visibility rolled back --------------------------------------------


def test_a_receive_rolled_back_leaves_the_message_as_it_was(app: App, queue: durableq.Queue) -> None:
    queue.send("job")
    with app.transaction(commit=False) as tx:
        (got,) = queue.receive(transaction=tx)
        assert got.receive_count == 1
    (again,) = queue.receive(wait_time=0)  # visible at once: the hiding rolled back
    assert again.receive_count == 1  # and the count with it


def test_a_receive_committed_holds(app: App, queue: durableq.Queue) -> None:
    queue.send("job")
    with app.transaction() as tx:
        (got,) = queue.receive(visibility_timeout=60, transaction=tx)
    assert queue.receive(wait_time=0) == []
    queue.delete(got.receipt_handle)  # its handle is the one that committed


def test_a_delete_rolled_back_leaves_it_in_flight_with_its_handle(app: App, queue: durableq.Queue) -> None:
    queue.send("job")
    (got,) = queue.receive(visibility_timeout=60)
    with app.transaction(commit=False) as tx:
        queue.delete(got.receipt_handle, transaction=tx)
        queue.delete_batch([got.receipt_handle], transaction=tx)
    assert queue.stats().approximate_number_of_messages_not_visible == 1
    queue.change_visibility(got.receipt_handle, 60)  # the handle is still the latest
    queue.delete(got.receipt_handle)
    assert queue.stats().approximate_number_of_messages_not_visible == 0


def test_change_visibility_inside(app: App, queue: durableq.Queue, clock: Any) -> None:
    queue.send("job")
    (got,) = queue.receive(visibility_timeout=60)
    with app.transaction(commit=False) as tx:
        queue.change_visibility(got.receipt_handle, 0, transaction=tx)
    assert queue.receive(wait_time=0) == []  # still hidden: the release rolled back
    with app.transaction() as tx:
        result = queue.change_visibility_batch([(got.receipt_handle, 0)], transaction=tx)
    assert len(result.successful) == 1
    assert [m.body for m in queue.receive(wait_time=0)] == ["job"]


# -- FIFO -------------------------------------------------------------------------------------


def test_fifo_order_and_deduplication_inside(app: App, fifo: durableq.Queue) -> None:
    with app.transaction() as tx:
        for body in ("a", "b", "c"):
            fifo.send(body, group_id="g", deduplication_id=body, transaction=tx)
    fifo.send("a", group_id="g", deduplication_id="a")  # a duplicate of the committed one
    with app.transaction(commit=False) as tx:
        fifo.send("d", group_id="g", deduplication_id="d", transaction=tx)
    fifo.send("d", group_id="g", deduplication_id="d")  # the rolled-back one left no dedup record
    assert [m.body for m in fifo.receive(max_messages=10, wait_time=0)] == ["a", "b", "c", "d"]


def test_a_fifo_receive_rolled_back_leaves_its_group_free(app: App, fifo: durableq.Queue) -> None:
    fifo.send("a", group_id="g", deduplication_id="a")
    fifo.send("b", group_id="g", deduplication_id="b")
    with app.transaction(commit=False) as tx:
        assert [m.body for m in fifo.receive(transaction=tx)] == ["a"]
    got = fifo.receive(max_messages=10, wait_time=0)  # the group is not held
    assert [(m.body, m.receive_count) for m in got] == [("a", 1), ("b", 1)]


# -- large payloads and encryption ---------------------------------------------------------------


def test_large_payloads_inside(app: App, broker: durableq.Broker, target: str, db_path: Path) -> None:
    queue = broker.create_queue("big", large_payloads=True, maximum_message_size=1024)
    store = Path(payload_dir(target, db_path) or f"{db_path}.payloads")
    body = "x" * 5000
    with app.transaction() as tx:
        queue.send(body, transaction=tx)
    (got,) = queue.receive(wait_time=0)
    assert got.body == body
    files = {p for p in store.rglob("*") if p.is_file() and len(p.name) == 32}
    with app.transaction(commit=False) as tx:
        queue.send(body + "y", transaction=tx)
    left = {p for p in store.rglob("*") if p.is_file() and len(p.name) == 32} - files
    if app.form == "driver":
        assert len(left) == 1  # the raw driver's rollback is not seen: the orphan sweep removes it
    else:
        assert left == set()  # removed when the rollback was seen
    with app.transaction() as tx:
        queue.delete(got.receipt_handle, transaction=tx)
    assert queue.stats().approximate_number_of_messages_not_visible == 0


def test_encryption_inside(app: App, target: str, db_path: Path, tmp_path: Path) -> None:
    keyring = durableq.Keyring(tmp_path / "keys")
    keyring.create("orders")
    with durableq.open(
        target, durability="normal", keyring=keyring, payload_dir=payload_dir(target, db_path)
    ) as broker:
        queue = broker.create_queue("secret", kms_master_key_id="alias/orders")
        app.broker = broker
        with app.transaction(commit=False) as tx:
            queue.send("rolled back", transaction=tx)
        with app.transaction() as tx:
            queue.send("kept", transaction=tx)
        assert [m.body for m in queue.receive(wait_time=0)] == ["kept"]
        (row,) = sql_rows(target, "SELECT body FROM durableq_messages")
        assert "kept" not in row[0]


# -- long polls wake at the commit ------------------------------------------------------------------


def test_a_long_poll_in_another_thread_wakes_at_the_commit(app: App, queue: durableq.Queue) -> None:
    got: list[list[durableq.Message]] = []
    poll = threading.Thread(target=lambda: got.append(queue.receive(wait_time=20)))
    poll.start()
    until_long_polls_wait()
    with app.transaction() as tx:
        queue.send("job", transaction=tx)
        assert got == [] and poll.is_alive()  # not before the commit
    poll.join(30)
    assert [[m.body for m in messages] for messages in got] == [["job"]]


_CHILD = """
import sys, threading
import durableq
from tests.conftest import FakeClock, until_long_polls_wait
# The parent's clock (a fake one): a message it sends is visible now to this process too.
with durableq.open(sys.argv[1], payload_dir=sys.argv[2] or None, clock=FakeClock()) as broker:
    queue = broker.get_queue("jobs")
    got = []
    poll = threading.Thread(target=lambda: got.append(queue.receive(wait_time=20)))
    poll.start()
    until_long_polls_wait()
    print("waiting", flush=True)
    poll.join()
    print(",".join(m.body for m in got[0]), flush=True)
"""


def test_a_long_poll_in_another_process_wakes_at_the_commit(
    app: App, queue: durableq.Queue, target: str, db_path: Path
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_CHILD), target, payload_dir(target, db_path) or ""],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "waiting"
        with app.transaction() as tx:
            queue.send("job", transaction=tx)
            assert child.poll() is None
        line = child.stdout.readline().strip()
        assert line == "job", child.stderr.read() if child.stderr else ""
    finally:
        child.kill()
        child.wait()


# -- what is refused ---------------------------------------------------------------------------------


def test_no_waiting_inside(app: App, queue: durableq.Queue) -> None:
    with app.transaction(commit=False) as tx:
        with pytest.raises(InvalidParameterValue, match="wait_time must be 0"):
            queue.receive(wait_time=5, transaction=tx)
        assert queue.receive(wait_time=0, transaction=tx) == []


def test_a_queue_that_waits_does_not_wait_inside(app: App, broker: durableq.Broker) -> None:
    queue = broker.create_queue("patient", receive_wait_time=20)
    with app.transaction(commit=False) as tx:
        assert queue.receive(transaction=tx) == []  # at once


def test_a_closed_transaction_is_refused(app: App, queue: durableq.Queue) -> None:
    with app.transaction() as tx:
        queue.send("one", transaction=tx)
    assert tx.closed
    with pytest.raises(InvalidParameterValue, match="is over"):
        queue.send("two", transaction=tx)


def test_a_transaction_of_another_broker_is_refused(
    app: App, target: str, db_path: Path, queue: durableq.Queue
) -> None:
    with durableq.open(target, durability="normal", payload_dir=payload_dir(target, db_path)) as other:
        with app.transaction(commit=False) as tx:
            with pytest.raises(InvalidParameterValue, match="another broker"):
                other.get_queue("jobs").send("x", transaction=tx)


def test_not_a_transaction(queue: durableq.Queue) -> None:
    with pytest.raises(InvalidParameterValue, match=r"durableq\.Transaction"):
        queue.send("x", transaction="tx")  # type: ignore[arg-type]


def test_unsupported_connections_are_refused(broker: durableq.Broker) -> None:
    with pytest.raises(InvalidParameterValue, match=r"a sqlite3\.Connection, a psycopg\.Connection"):
        with broker.transaction(object()):
            pass


def test_a_connection_to_another_database_is_refused(broker: durableq.Broker, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    durableq.open(other).close()
    conn = sqlite3.connect(other)
    try:
        if broker.path is None:
            with pytest.raises(InvalidParameterValue, match="cannot join"):
                broker.transaction(conn).__enter__()
        else:
            with pytest.raises(InvalidParameterValue, match="not to the broker's database"):
                broker.transaction(conn).__enter__()
    finally:
        conn.close()


def test_autocommit_connections_are_refused(broker: durableq.Broker, target: str) -> None:
    if target.startswith("postgresql://"):
        import psycopg

        conn: Any = psycopg.connect(target, autocommit=True)
    else:
        conn = sqlite3.connect(target, isolation_level=None)
    try:
        with pytest.raises(InvalidParameterValue, match="autocommit"):
            broker.transaction(conn).__enter__()
    finally:
        conn.close()


def test_a_failed_operation_leaves_the_transaction_usable(
    app: App, target: str, queue: durableq.Queue
) -> None:
    with app.transaction() as tx:
        tx.execute("INSERT INTO orders (note) VALUES (?)", ("kept",))
        with pytest.raises(durableq.ReceiptHandleIsInvalid):
            queue.delete("not a handle", transaction=tx)
        queue.send("after the failure", transaction=tx)
    assert count(target, "orders") == 1
    assert [m.body for m in queue.receive(wait_time=0)] == ["after the failure"]


def test_the_own_form_rolls_back_on_an_exception(
    broker: durableq.Broker, target: str, queue: durableq.Queue
) -> None:
    make_orders(target)
    with pytest.raises(KeyError):
        with broker.transaction() as tx:
            tx.execute("INSERT INTO orders (note) VALUES (?)", ("gone",))
            queue.send("gone", transaction=tx)
            raise KeyError
    assert count(target, "orders") == 0
    assert queue.receive(wait_time=0) == []


@pytest.mark.sqlite_only("group commit is the SQLite engine's")
@pytest.mark.parametrize("commit", [True, False])
def test_the_own_form_is_never_part_of_a_group_commit(engine: str, db_path: Path, commit: bool) -> None:
    with durableq.open(db_path, durability="full") as broker:
        queue = broker.create_queue("jobs")
        db = broker._rt.db
        before = db.group_stats.grouped
        senders = [threading.Thread(target=queue.send, args=(f"other {i}",)) for i in range(3)]
        try:
            with broker.transaction() as tx:
                queue.send("mine", transaction=tx)
                for sender in senders:
                    sender.start()
                until(lambda: db.waiting == 3, "the other writes wait in line behind the transaction")
                if not commit:
                    raise Rollback
        except Rollback:
            pass
        for sender in senders:
            sender.join(30)
        bodies = sorted(m.body for m in queue.receive(max_messages=10, wait_time=0))
        assert bodies == (["mine"] if commit else []) + ["other 0", "other 1", "other 2"]
        assert db.group_stats.grouped - before == 3  # the three batched together, the transaction alone


@pytest.mark.parametrize("durability", ["full", "normal"])
@pytest.mark.parametrize("call", ["send", "delete", "stats", "purge"])
def test_a_call_without_the_transaction_on_its_thread_is_refused_at_once(
    target: str, db_path: Path, durability: str, call: str
) -> None:
    # The thread that holds durableq's own transaction open and writes without ``transaction=``
    # would wait for itself: at "full" for the group-commit gate it holds (forever), elsewhere for
    # the write lock until the busy timeout.  It gets a clear error at once instead, and the
    # transaction goes on.  (Run in a thread of its own, so a hang fails the test, not the run.)
    outcome: dict[str, object] = {}
    with durableq.open(target, durability=durability, payload_dir=payload_dir(target, db_path)) as broker:
        queue = broker.create_queue("jobs")
        queue.send("held")
        handle = queue.receive(1, visibility_timeout=30)[0].receipt_handle

        def work() -> None:
            with broker.transaction() as tx:
                queue.send("inside", transaction=tx)
                calls = {
                    "send": lambda: queue.send("outside"),
                    "delete": lambda: queue.delete(handle),
                    "stats": queue.stats,
                    "purge": queue.purge,
                }
                try:
                    calls[call]()
                except durableq.DurableQError as exc:
                    outcome["error"] = exc
                queue.send("after the refusal", transaction=tx)
            outcome["committed"] = True

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), f"{call} without transaction= waited for its own thread's transaction"
        error = outcome.get("error")
        assert isinstance(error, InvalidParameterValue), error
        assert "transaction=" in str(error), error
        assert outcome.get("committed") is True
        bodies = sorted(m.body for m in queue.receive(10, visibility_timeout=30))
        assert bodies == ["after the refusal", "inside"]
