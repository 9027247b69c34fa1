"""What is particular to the PostgreSQL engine: its schema, claims side by side, notification across
processes, lost connections, and the words of its errors.  (The queue semantics themselves are the
contract suite: every test on the ``broker`` fixture runs on both engines.)"""

from __future__ import annotations

import multiprocessing
import select
import threading
import time
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

import durableq
from durableq.engines.fileformat import SCHEMA_REVISION, VERSION_TABLE
from durableq.engines.postgres.connection import placeholders
from durableq.engines.schema import metadata

from . import pgcluster
from .conftest import until_long_polls_wait


@pytest.fixture
def url(pg_url: str) -> str:
    return pg_url


@pytest.fixture
def empty_url(pg_cluster: pgcluster.Cluster) -> Iterator[str]:
    name = pgcluster.create_database(pg_cluster)
    try:
        yield pg_cluster.url(name)
    finally:
        pgcluster.drop_database(pg_cluster, name)


def test_migrations_create_the_declared_tables_and_columns(empty_url: str) -> None:
    durableq.open(empty_url).close()
    engine = sa.create_engine(empty_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        inspector = sa.inspect(engine)
        with engine.connect() as conn:
            revision = conn.execute(sa.text(f"SELECT version_num FROM durableq.{VERSION_TABLE}")).scalar()
        declared = {t.name: sorted(c.name for c in t.columns) for t in metadata.sorted_tables}
        found = {
            name: sorted(
                c["name"] for c in inspector.get_columns(name, schema="durableq") if c["name"] != "rowid"
            )
            for name in inspector.get_table_names(schema="durableq")
            if name not in (VERSION_TABLE, "durableq_catalog")
        }
        time_columns = {
            c["name"]: str(c["type"]) for c in inspector.get_columns("durableq_messages", schema="durableq")
        }
        indexes = {i["name"] for i in inspector.get_indexes("durableq_messages", schema="durableq")}
    finally:
        engine.dispose()
    assert revision == SCHEMA_REVISION
    assert found == declared
    assert time_columns["visible_at"] == "BIGINT" and time_columns["id"] == "BIGINT"
    assert {
        "durableq_ix_messages_visible",
        "durableq_ix_messages_virtual",
        "durableq_ix_messages_group",
        "durableq_ix_messages_payload",
    } <= indexes


def test_two_brokers_migrating_an_empty_database_at_once_both_open_it(empty_url: str) -> None:
    errors: list[durableq.DurableQError] = []
    barrier = threading.Barrier(2)

    def open_it() -> None:
        barrier.wait()
        try:
            durableq.open(empty_url).close()
        except durableq.DurableQError as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    with durableq.open(empty_url) as broker:
        broker.create_queue("jobs").send("after")
        assert [m.body for m in broker.get_queue("jobs").receive()] == ["after"]


def test_claims_side_by_side_never_hand_one_message_to_two_receivers(url: str) -> None:
    with durableq.open(url, durability="normal") as broker:
        queue = broker.create_queue("jobs", visibility_timeout=600)
        total = 400
        for start in range(0, total, 10):
            queue.send_batch([durableq.SendEntry(str(i), str(i)) for i in range(start, start + 10)])
        got: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(8)

        def consume() -> None:
            barrier.wait()
            while batch := queue.receive(max_messages=3):
                with lock:
                    got.extend(m.body for m in batch)

        threads = [threading.Thread(target=consume) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(got, key=int) == [str(i) for i in range(total)]  # each once, none missed
        assert queue.stats().approximate_number_of_messages_not_visible == total


def _send_later(url: str, body: str) -> None:
    with durableq.open(url) as broker:
        broker.get_queue("jobs").send(body)


def test_a_commit_in_another_process_wakes_a_long_poll_by_notify(url: str) -> None:
    with durableq.open(url) as broker:
        queue = broker.create_queue("jobs")
        received: list[durableq.Message] = []
        poll = threading.Thread(target=lambda: received.extend(queue.receive(wait_time=20)))
        started = time.monotonic()
        poll.start()
        until_long_polls_wait()
        sender = multiprocessing.get_context("spawn").Process(target=_send_later, args=(url, "from afar"))
        sender.start()
        sender.join(60)
        poll.join(30)
        assert sender.exitcode == 0 and not poll.is_alive()
        # Woken by the notification, not by the 20 s deadline (nor by the watcher's 1 s probe alone:
        # the row count below shows the wake found the message).
        assert time.monotonic() - started < 15
    assert [m.body for m in received] == ["from afar"]


def test_the_listening_socket_becomes_readable_at_a_commit_of_another_connection(url: str) -> None:
    """The watcher's change source: its socket becomes readable when any connection, of any host,
    commits a NOTIFY on the channel (which every durableq write that changed rows sends while a
    listener is registered, as this one is), and it reads as a commit; nothing else makes it readable."""
    from durableq.engines.change_sources import News
    from durableq.engines.postgres.database import Database

    db = Database(url, durability="normal", busy_timeout=5)
    source = db._listen_source()
    try:
        assert source.fileno is not None
        assert select.select([source.fileno], [], [], 0.2)[0] == []  # quiet while nobody commits
        with durableq.open(url) as broker:  # another connection of its own: as another host would
            broker.create_queue("jobs").send("x")
        assert select.select([source.fileno], [], [], 10)[0] == [source.fileno]
        assert source.read() is News.COMMITTED
        assert source.read() is News.NOTHING  # consumed
    finally:
        source.close()
        db.close()


def test_a_connection_the_server_ends_is_replaced_on_the_next_call(
    url: str, pg_cluster: pgcluster.Cluster
) -> None:
    with durableq.open(url) as broker:
        queue = broker.create_queue("jobs")
        queue.send("before")
        with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = 'durableq'",
                (url.rsplit("/", 1)[1],),
            ).fetchone()
        assert ended is not None and ended[0] >= 1
        # The call that meets the dead connection fails clearly; the next one reconnects.
        try:
            queue.send("maybe")
        except durableq.DatabaseError as exc:
            assert "cannot reach the database" in str(exc) or "connection" in str(exc)
        queue.send("after")
        bodies = Counter(m.body for m in queue.receive(max_messages=10))
    assert bodies["before"] == 1 and bodies["after"] == 1


def test_a_server_that_is_not_there_is_a_clear_error_without_the_password(
    pg_cluster: pgcluster.Cluster,
) -> None:
    dead = f"postgresql://someone:s3cret@127.0.0.1:{pgcluster._free_port()}/nowhere"
    with pytest.raises(durableq.DatabaseError) as raised:
        durableq.open(dead, busy_timeout=2)
    message = str(raised.value)
    assert "cannot reach the database" in message and "nowhere" in message
    assert "s3cret" not in message and "someone:***@" in message


def test_repr_and_location_name_the_database(url: str) -> None:
    with durableq.open(url) as broker:
        queue = broker.create_queue("jobs")
        assert broker.path is None and broker.location == url
        assert url in repr(broker) and url in repr(queue)


def test_backup_is_refused_on_postgresql(url: str, tmp_path: pytest.TempPathFactory) -> None:
    with durableq.open(url) as broker, pytest.raises(durableq.UnsupportedOperation, match="pg_dump"):
        broker.backup(f"{tmp_path}/copy.db")


def test_large_payloads_need_a_payload_dir_on_postgresql(url: str) -> None:
    with durableq.open(url) as broker:
        queue = broker.create_queue("big", large_payloads=True, maximum_message_size=1024)
        queue.send("x" * 100)  # small messages stay in the row: no store needed
        with pytest.raises(durableq.InvalidParameterValue, match="payload_dir"):
            queue.send("x" * 5000)
        assert [m.body for m in queue.receive(max_messages=10)] == ["x" * 100]


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("SELECT a FROM t WHERE id = :id", "SELECT a FROM t WHERE id = %(id)s"),
        ("SELECT a FROM t WHERE id = ? AND b = ?", "SELECT a FROM t WHERE id = %s AND b = %s"),
        ("SELECT ':not' || x::text, '50%' FROM t", "SELECT ':not' || x::text, '50%%' FROM t"),
        ("SELECT 1 /* :no ? */ -- nor :this\n", "SELECT 1 /* :no ? */ -- nor :this\n"),
    ],
)
def test_parameters_are_sent_in_psycopg_style(written: str, sent: str) -> None:
    """Only the parameter style is translated (the fragments that differ come from the dialect: see
    test_engine_contract.py); literals, comments and casts stay as they are."""
    assert placeholders(written) == sent


def _child_that_uses_its_own_broker(url: str) -> None:
    with durableq.open(url) as broker:
        broker.get_queue("jobs").send("from the child")


def test_a_forked_child_leaves_its_parents_connections_alive(url: str) -> None:
    """A forked child inherits the parent's sockets; when it exits, its copies must not end the
    parent's sessions (closing a copied libpq connection would send the server a Terminate)."""
    with durableq.open(url) as broker:
        queue = broker.create_queue("jobs", receive_wait_time=1)
        queue.send("from the parent")
        queue.receive(wait_time=1, visibility_timeout=0)  # the watcher's connections exist too
        child = multiprocessing.get_context("fork").Process(
            target=_child_that_uses_its_own_broker, args=(url,)
        )
        child.start()
        child.join(60)
        assert child.exitcode == 0
        queue.send("after the child")  # the parent's own connection still works
        bodies = sorted(m.body for m in queue.receive(max_messages=10, wait_time=1))
    assert bodies == ["after the child", "from the child", "from the parent"]
