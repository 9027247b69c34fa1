"""A reader that resumes after the last event id it saw misses nothing, on either engine.

PostgreSQL gives event ids (a sequence) in one order and may commit them in another: writes of one
statement run side by side, so a send can take id N, a later send id N + 1 and commit first.  A
reader must never see N + 1 while N can still commit (see ``Database.settled_read``).  These tests
hold a real send's transaction open after it took its id (a trigger that waits on an advisory lock
the test holds), so that a later id commits first every time, not by luck."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

import durableq

from .conftest import FakeClock, sql_rows
from .held import Held

#: Readers that resume after an event id: ``read(broker, after)`` -> event ids above ``after``.
Read = Callable[[durableq.Broker, int], list[int]]


def _message_events(broker: durableq.Broker, after: int) -> list[int]:
    return [e.event_id for e in broker.message_events(after=after)]


def _queue_events(broker: durableq.Broker, after: int) -> list[int]:
    return [e.event_id for e in broker.get_queue("jobs").events(after=after)]


def _up_to_newest(broker: durableq.Broker, after: int) -> list[int]:
    # As the durableq-events stream source reads: the newest id first, then the events up to it.
    newest = broker.newest_event_id()
    return [e.event_id for e in broker.message_events(after=after, until=newest)] if newest > after else []


READERS = {"message_events": _message_events, "queue.events": _queue_events, "newest_event_id": _up_to_newest}


@pytest.fixture
def history(pg_url: str) -> Iterator[durableq.Broker]:
    """A broker on a PostgreSQL database with the history queue ``jobs``."""
    with durableq.open(pg_url, clock=FakeClock(), durability="normal", busy_timeout=60) as broker:
        broker.create_queue("jobs", history=True)
        yield broker


def _committed(url: str) -> list[int]:
    return [row[0] for row in sql_rows(url, "SELECT event_id FROM durableq_message_events ORDER BY event_id")]


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_a_later_id_that_commits_first_is_not_read_before_the_earlier_one(
    pg_url: str, history: durableq.Broker, read: Read
) -> None:
    broker = history
    with Held(pg_url, broker.get_queue("jobs")) as held:  # took its event id, not committed
        quick = broker.get_queue("jobs").send("quick")  # a higher id, committed first
        first: list[int] = []
        reader = threading.Thread(target=lambda: first.extend(read(broker, 0)))
        reader.start()
        # It returns (and must not have read past the held id), or waits for the held send to end.
        held.reader_waits_or_is_done(reader)
    reader.join(60)
    rest = read(broker, first[-1] if first else 0)
    committed = _committed(pg_url)
    events = {e.message_id: e.event_id for e in broker.message_events()}
    assert len(committed) == 2 and events[quick.message_id] == committed[1]  # the later id committed first
    assert first + rest == committed  # each once, none skipped


def test_a_reader_waits_only_for_writes_under_way(pg_url: str, history: durableq.Broker) -> None:
    """After the held write ends, reads go on at once."""
    broker = history
    with Held(pg_url, broker.get_queue("jobs")):
        pass
    jobs = broker.get_queue("jobs")
    for body in ("a", "b"):
        jobs.send(body)
        assert _message_events(broker, 0) == _committed(pg_url)
    assert broker.newest_event_id() == _committed(pg_url)[-1]


def test_senders_side_by_side_and_a_tailing_reader_see_every_event_once(target: str) -> None:
    """8 threads (8 connections) send to a history queue while a reader tails message_events(after=last)."""
    with durableq.open(target, clock=FakeClock(), durability="normal", busy_timeout=30) as broker:
        jobs = broker.create_queue("jobs", history=True)
        done = threading.Event()
        errors: list[BaseException] = []

        def send() -> None:
            try:
                for i in range(60):
                    jobs.send(str(i))
            except durableq.DurableQError as exc:  # reported below
                errors.append(exc)

        seen: list[int] = []

        def tail() -> None:
            last = 0
            while True:
                finished = done.is_set()  # every send returned before this read began
                events = broker.message_events(after=last, limit=50)
                seen.extend(e.event_id for e in events)
                last = events[-1].event_id if events else last
                if finished and not events:
                    break

        senders = [threading.Thread(target=send) for _ in range(8)]
        reader = threading.Thread(target=tail)
        reader.start()
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join(120)
        done.set()
        reader.join(120)
        assert errors == [] and not reader.is_alive()
        committed = _committed(target)
    assert len(committed) == 8 * 60
    assert seen == committed  # every one, once, in id order
