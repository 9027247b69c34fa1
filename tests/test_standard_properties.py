"""Hypothesis: on a standard queue nothing is lost, a deleted message never comes
back, and no message has two holders inside a visibility window."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import durableq
from tests.conftest import FakeClock


class StandardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.clock = FakeClock()
        self.broker = durableq.open(self.dir / "std.db", clock=self.clock, durability="normal")
        self.queue = self.broker.create_queue("jobs")
        self.live: dict[str, float] = {}  # message id -> hidden until
        self.sent: list[str] = []  # ids in send order: draws must not depend on random ids
        self.handles: dict[str, list[str]] = {}
        self.deleted: set[str] = set()

    def teardown(self) -> None:
        self.broker.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(delay=st.sampled_from([None, 0, 5, 30]))
    def send(self, delay: int | None) -> None:
        result = self.queue.send("x", delay_seconds=delay)
        self.live[result.message_id] = self.clock() + (delay or 0)
        self.sent.append(result.message_id)

    @rule(count=st.integers(1, 10), timeout=st.integers(0, 60))
    def receive(self, count: int, timeout: int) -> None:
        now = self.clock()
        visible = sum(until <= now for until in self.live.values())
        received = self.queue.receive(count, visibility_timeout=timeout)
        ids = [m.message_id for m in received]
        assert len(ids) == len(set(ids))
        for message in received:
            assert message.message_id not in self.deleted, "a deleted message came back"
            assert self.live[message.message_id] <= now, "received while another holder had it"
            self.live[message.message_id] = now + timeout
            self.handles.setdefault(message.message_id, []).append(message.receipt_handle)
        assert len(received) == min(count, visible), "visible messages were left behind"

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        message_id = data.draw(st.sampled_from([m for m in self.sent if m in self.handles]))
        handle = data.draw(st.sampled_from(self.handles[message_id]))
        self.queue.delete(handle)  # any handle ever issued deletes; again is fine
        self.live.pop(message_id, None)
        self.deleted.add(message_id)

    @precondition(lambda self: any(m in self.live for m in self.handles))
    @rule(data=st.data(), timeout=st.integers(0, 60))
    def change_visibility(self, data: st.DataObject, timeout: int) -> None:
        message_id = data.draw(
            st.sampled_from([m for m in self.sent if m in self.handles and m in self.live])
        )
        handle = data.draw(st.sampled_from(self.handles[message_id]))
        try:
            self.queue.change_visibility(handle, timeout)
        except durableq.MessageNotInflight:
            assert handle != self.handles[message_id][-1]
        else:
            assert handle == self.handles[message_id][-1]
            self.live[message_id] = self.clock() + timeout

    @rule(seconds=st.sampled_from([1, 5, 30, 61]))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def nothing_is_lost(self) -> None:
        stats = self.queue.stats()
        total = (
            stats.approximate_number_of_messages
            + stats.approximate_number_of_messages_not_visible
            + stats.approximate_number_of_messages_delayed
        )
        assert total == len(self.live)


TestStandardProperties = StandardMachine.TestCase
TestStandardProperties.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
