"""Message history: every change to a message of a queue with history on leaves one event, written
in the change's own transaction; queues without it leave none; events are swept after the queue's
history retention and go with the queue."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta
from pathlib import Path

import pytest

import durableq
from durableq import RedrivePolicy, SendEntry
from durableq.ops import history
from tests.conftest import FakeClock, sql_rows


def _trail(queue: durableq.Queue) -> list[tuple[str, str, int, str | None]]:
    return [(e.event, e.message_id, e.receive_count, e.other_queue) for e in queue.events()]


def test_a_standard_message_life_is_recorded_in_order(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs", history=True)
    a = jobs.send("a").message_id
    batch = jobs.send_batch([SendEntry("1", "b"), SendEntry("2", "c")])
    b, c = (s.message_id for s in batch.successful)
    received = {m.message_id: m for m in jobs.receive(10)}
    jobs.change_visibility(received[a].receipt_handle, 0)
    jobs.extend_visibility(received[b].receipt_handle, 60)
    jobs.change_visibility_batch([(received[c].receipt_handle, 5)])
    jobs.delete(received[b].receipt_handle)
    jobs.delete_batch([received[c].receipt_handle])
    jobs.delete(received[c].receipt_handle)  # already gone: succeeds, and nothing happened to record
    (again,) = jobs.receive(10)
    assert _trail(jobs) == [
        ("sent", a, 0, None),
        ("sent", b, 0, None),
        ("sent", c, 0, None),
        ("received", a, 1, None),
        ("received", b, 1, None),
        ("received", c, 1, None),
        ("visibility_changed", a, 1, None),
        ("visibility_changed", b, 1, None),
        ("visibility_changed", c, 1, None),
        ("deleted", b, 1, None),
        ("deleted", c, 1, None),
        ("received", a, 2, None),
    ]
    assert again.message_id == a
    events = jobs.events()
    assert [e.event_id for e in events] == sorted({e.event_id for e in events})
    assert all(e.queue == "jobs" and e.at == broker_time(clock) for e in events)


def broker_time(clock: FakeClock) -> object:
    from durableq.types import datetime_from_ms

    return datetime_from_ms(int(clock() * 1000))


def test_sends_and_visibility_changes_say_when_the_message_becomes_visible(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    """``visible_at`` tells a message's delay apart from its wait: the send's, by the message's delay
    or the queue's; a visibility change's new time; none on the other events."""
    jobs = broker.create_queue("jobs", history=True, delay_seconds=4)
    slow = broker.create_queue("slow.fifo", fifo=True, history=True, delay_seconds=9)
    now = int(clock() * 1000)
    jobs.send("queue's delay")
    jobs.send("own delay", delay_seconds=30)
    jobs.send_batch([SendEntry("1", "none", delay_seconds=0), SendEntry("2", "batch's", delay_seconds=7)])
    slow.send("fifo", group_id="g", deduplication_id="d")
    clock.advance(10)
    (message,) = jobs.receive(1)
    jobs.change_visibility(message.receipt_handle, 20)
    later = int(clock() * 1000)
    jobs.delete(message.receipt_handle)

    def offsets(queue: durableq.Queue) -> list[tuple[str, int | None]]:
        return [
            (e.event, None if e.visible_at is None else round(e.visible_at.timestamp() * 1000) - now)
            for e in queue.events()
        ]

    assert offsets(jobs) == [
        ("sent", 4000),
        ("sent", 30_000),
        ("sent", 0),
        ("sent", 7000),
        ("received", None),
        ("visibility_changed", later - now + 20_000),
        ("deleted", None),
    ]
    assert offsets(slow) == [("sent", 9000)]


def test_fifo_messages_are_recorded_the_same_way(broker: durableq.Broker) -> None:
    orders = broker.create_queue("orders.fifo", fifo=True, content_based_deduplication=True, history=True)
    first = orders.send("one", group_id="g").message_id
    assert orders.send("one", group_id="g").message_id == first  # a duplicate: nothing new happened
    second = orders.send("two", group_id="g").message_id
    (m,) = orders.receive(1)
    orders.change_visibility(m.receipt_handle, 30)
    orders.delete(m.receipt_handle)
    with pytest.raises(durableq.ReceiptHandleIsInvalid):
        orders.delete(m.receipt_handle)  # refused: no event
    assert _trail(orders) == [
        ("sent", first, 0, None),
        ("sent", second, 0, None),
        ("received", first, 1, None),
        ("visibility_changed", first, 1, None),
        ("deleted", first, 1, None),
    ]


def test_moves_are_recorded_on_both_queues(broker: durableq.Broker) -> None:
    dlq = broker.create_queue("jobs-dlq", history=True)
    jobs = broker.create_queue(
        "jobs", history=True, visibility_timeout=0, redrive_policy=RedrivePolicy("jobs-dlq", 1)
    )
    message_id = jobs.send("x").message_id
    assert len(jobs.receive()) == 1
    assert jobs.receive() == []  # received once already: it goes to the dead-letter queue instead
    task = broker.start_message_move("jobs-dlq")
    broker.wait_for_message_move(task.task_handle, 30)
    assert _trail(jobs) == [
        ("sent", message_id, 0, None),
        ("received", message_id, 1, None),
        ("moved_to_dead_letter", message_id, 1, "jobs-dlq"),
        ("moved_in", message_id, 0, "jobs-dlq"),  # a moved message arrives as new: received 0 times
    ]
    assert _trail(dlq) == [
        ("moved_in", message_id, 1, "jobs"),
        ("moved_out", message_id, 1, "jobs"),
    ]


def test_purge_and_expiry_are_recorded(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs", history=True, retention_period=60)
    purged = [jobs.send(str(i)).message_id for i in range(3)]
    jobs.purge()
    kept = jobs.send("old").message_id
    clock.advance(61)
    assert jobs.receive() == []  # the receive sweeps the expired message
    assert [(e, m) for e, m, _, _ in _trail(jobs)] == [
        *[("sent", m) for m in purged],
        *[("purged", m) for m in purged],
        ("sent", kept),
        ("expired", kept),
    ]


def test_queues_without_history_write_no_events(broker: durableq.Broker, target: str) -> None:
    plain = broker.create_queue("plain")
    plain.send("x")
    (m,) = plain.receive()
    plain.delete(m.receipt_handle)
    assert plain.events() == []
    assert sql_rows(target, "SELECT count(*) FROM durableq_message_events") == [(0,)]


def test_history_can_be_turned_on_and_off(broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs")
    jobs.send("before")
    jobs.set_attributes(history=True)
    assert jobs.attributes()["history"] is True
    during = jobs.send("during").message_id
    jobs.set_attributes(history=False)
    jobs.send("after")
    assert _trail(jobs) == [("sent", during, 0, None)]  # what was kept stays until its time is up


def test_a_refused_entry_writes_no_event_and_its_batch_neighbours_do(broker: durableq.Broker) -> None:
    jobs = broker.create_queue("jobs", history=True, maximum_message_size=1024)
    result = jobs.send_batch([SendEntry("ok", "small"), SendEntry("big", "x" * 2000)])
    assert [f.id for f in result.failed] == ["big"]
    with pytest.raises(durableq.InvalidParameterValue):
        jobs.send("y" * 2000)
    assert _trail(jobs) == [("sent", result.successful[0].message_id, 0, None)]


def test_events_go_after_the_history_retention_and_with_the_queue(
    broker: durableq.Broker, clock: FakeClock, target: str
) -> None:
    jobs = broker.create_queue("jobs", history=True, history_retention=120)
    other = broker.create_queue("other", history=True)
    jobs.send("old")
    clock.advance(100)
    new = jobs.send("new").message_id
    other.send("x")
    clock.advance(30)  # "old" was sent 130 s ago, "new" 30 s ago
    jobs.stats()  # sweeps
    assert [m for _, m, _, _ in _trail(jobs)] == [new]
    broker.delete_queue("jobs")
    assert _rows(target) == [("other", "sent")]


def test_event_ids_are_never_reused(broker: durableq.Broker, clock: FakeClock, target: str) -> None:
    # The newest event is never deleted (it keeps SQLite's next rowid above every id given),
    # neither by the sweep nor with its queue.
    jobs = broker.create_queue("jobs", history=True, history_retention=60)
    jobs.send("a")
    jobs.send("b")
    newest = jobs.events()[-1].event_id
    clock.advance(120)
    jobs.stats()  # sweeps: both are past their retention, the newest stays
    assert [e.event_id for e in jobs.events()] == [newest]
    broker.delete_queue("jobs")
    assert _rows(target) == [(None, "sent")]  # a placeholder of no queue
    again = broker.create_queue("jobs", history=True)
    again.send("later")
    assert again.events()[0].event_id == newest + 1
    again.stats()  # the placeholder goes once a newer event exists
    assert _rows(target) == [("jobs", "sent")]


def _rows(target: str) -> list[tuple[str | None, str]]:
    return sql_rows(
        target,
        "SELECT q.name, e.event FROM durableq_message_events e "
        "LEFT JOIN durableq_queues q ON q.id = e.queue_id "
        "ORDER BY e.event_id",
    )


def test_reading_filters_and_checks_its_arguments(broker: durableq.Broker, clock: FakeClock) -> None:
    jobs = broker.create_queue("jobs", history=True)
    first = jobs.send("a").message_id
    clock.advance(10)
    second = jobs.send("b").message_id
    start = broker_time(clock)
    assert [e.message_id for e in jobs.events(since=start)] == [second]  # type: ignore[arg-type]
    (head,) = jobs.events(limit=1)
    assert head.message_id == first
    assert [e.message_id for e in jobs.events(after=head.event_id)] == [second]
    with pytest.raises(durableq.InvalidParameterValue, match="limit"):
        jobs.events(limit=0)
    with pytest.raises(durableq.InvalidParameterValue, match="after"):
        jobs.events(after=-1)
    with pytest.raises(durableq.InvalidAttributeValue, match="history_retention"):
        jobs.set_attributes(history_retention=59)
    with pytest.raises(durableq.InvalidAttributeValue, match="history"):
        jobs.set_attributes(history="yes")
    assert timedelta(0) <= start - head.at  # type: ignore[operator]


def test_grouped_writes_of_many_threads_record_each_change_once(tmp_path: Path) -> None:
    # Durability "full" groups the commits of concurrent threads, each in its own savepoint.
    import threading

    with durableq.open(tmp_path / "q.db") as b:
        jobs = b.create_queue("jobs", history=True)

        def work() -> None:
            for _ in range(20):
                jobs.send("x")
                for m in jobs.receive(1):
                    jobs.delete(m.receipt_handle)

        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        while drained := jobs.receive(10):
            for m in drained:
                jobs.delete(m.receipt_handle)
        events = jobs.events(limit=10_000)
    trails: dict[str, list[str]] = {}
    for e in events:
        trails.setdefault(e.message_id, []).append(e.event)
    assert len(trails) == 120
    assert all(trail == ["sent", "received", "deleted"] for trail in trails.values()), trails


def _send_from_another_process(path: str, count: int) -> None:
    with durableq.open(path) as b:
        q = b.get_queue("jobs")
        for i in range(count):
            q.send(str(i))


def test_events_of_other_processes_are_recorded(target: str) -> None:
    with durableq.open(target) as b:
        jobs = b.create_queue("jobs", history=True)
        ctx = multiprocessing.get_context("spawn")
        workers = [ctx.Process(target=_send_from_another_process, args=(target, 25)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
            assert w.exitcode == 0
        events = jobs.events()
    assert [e.event for e in events] == ["sent"] * 50
    assert len({e.message_id for e in events}) == 50


def test_every_event_name_is_listed() -> None:
    assert set(history.EVENTS) == {
        "sent",
        "received",
        "visibility_changed",
        "deleted",
        "moved_to_dead_letter",
        "moved_out",
        "moved_in",
        "expired",
        "purged",
    }
