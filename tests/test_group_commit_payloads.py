"""Group commit meets the payload store: a large payload's file stays as long as a row names it.

A send that fails removes the payload file it wrote, unless a row names it after all
(``Payloads.abandon``: "the failure came after the commit").  In a batch of group commit the
send's row may still be on its way to a commit when the send raises: interrupted while it waits
for the batch's ``COMMIT`` (a signal handler that raises, ``KeyboardInterrupt``), its work stays
in the batch and commits with the others.  Looking on the thread's own connection then finds no
row yet, and the file goes while its row commits.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq
from durableq.engines.sqlite import group
from tests.conftest import FakeClock, threads_inside, until
from tests.grouping import Blocking, Calls, db_of


@pytest.fixture
def broker(db_path: Path, clock: FakeClock) -> Iterator[durableq.Broker]:
    """Group commit is for durability "full"."""
    with durableq.open(db_path, clock=clock, durability="full") as opened:
        yield opened


def test_an_interrupted_grouped_send_leaves_no_row_without_its_payload(
    broker: durableq.Broker, clock: FakeClock
) -> None:
    queue = broker.create_queue("jobs", large_payloads=True, maximum_message_size=1024)
    db = db_of(broker)
    calls, holder, blocker = Calls(), Blocking(db, "jobs", 1), Blocking(db, "jobs", 2)
    calls.start("holder", holder)  # writes alone: the writes below wait in line behind it
    holder.inside.wait()
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()

    def orchestrate() -> None:
        until(lambda: db.waiting == 1, "the large send waits in line")
        calls.start("blocker", blocker)  # after it in line: its batch's last member
        until(lambda: db.waiting == 2, "the blocking write waits in line")
        holder.release()  # the two form one batch: the send's turn, then the blocker holds it open
        blocker.inside.wait()
        until(lambda: main in threads_inside(group._Signal.wait.__code__), "the send waits for the commit")
        signal.pthread_kill(main, signal.SIGINT)

    orchestrator = threading.Thread(target=orchestrate)
    orchestrator.start()
    body = "x" * 5_000
    with pytest.raises(KeyboardInterrupt):
        queue.send(body)  # its row is in the batch: it commits with the blocker's write
    orchestrator.join()
    blocker.release()
    outcomes = calls.join()
    assert outcomes == {"holder": None, "blocker": None}, outcomes
    # The interrupted send may or may not have happened; if its row is there, so is its payload.
    clock.advance(10)  # past the delay the blocking writes gave the queue
    received = queue.receive(10)
    assert all(m.unreadable is None and m.body == body for m in received), [m.unreadable for m in received]
