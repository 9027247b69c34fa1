"""Hypothesis: FIFO order per group and group blocking hold under any interleaving
of send, receive, delete, change visibility and the passing of time."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import durableq
from tests.conftest import FakeClock

GROUPS = ("a", "b", "c")


@dataclass
class Live:
    body: str
    group: str
    hidden_until: float = 0.0  # in flight while the clock is before this
    handle: str | None = None
    handles: list[str] = field(default_factory=list)


class FifoMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.clock = FakeClock()
        self.broker = durableq.open(self.dir / "fifo.db", clock=self.clock, durability="normal")
        self.queue = self.broker.create_queue("p.fifo", fifo=True, content_based_deduplication=True)
        self.groups: dict[str, list[Live]] = {g: [] for g in GROUPS}
        self.by_body: dict[str, Live] = {}
        self.deleted: list[Live] = []
        self.sent = 0

    def teardown(self) -> None:
        self.broker.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _in_flight(self, group: str) -> bool:
        return any(m.hidden_until > self.clock() for m in self.groups[group])

    @rule(group=st.sampled_from(GROUPS))
    def send(self, group: str) -> None:
        body = f"{group}-{self.sent}"
        self.sent += 1
        self.queue.send(body, group_id=group)
        live = Live(body, group)
        self.groups[group].append(live)
        self.by_body[body] = live

    @rule(count=st.integers(1, 10), timeout=st.integers(0, 40))
    def receive(self, count: int, timeout: int) -> None:
        blocked = {g for g in GROUPS if self._in_flight(g)}
        received = self.queue.receive(count, visibility_timeout=timeout)
        assert len(received) <= count
        seen: dict[str, list[str]] = {}
        for message in received:
            assert message.group_id not in blocked, f"group {message.group_id} was in flight"
            seen.setdefault(message.group_id, []).append(message.body)  # type: ignore[arg-type]
        for group, bodies in seen.items():
            expected = [m.body for m in self.groups[group][: len(bodies)]]
            assert bodies == expected, f"group {group}: got {bodies}, order is {expected}"
        for message in received:
            live = self.by_body[message.body]
            live.hidden_until = self.clock() + timeout
            live.handle = message.receipt_handle
            live.handles.append(message.receipt_handle)
        servable = [g for g in GROUPS if g not in blocked and self.groups[g]]
        if servable:
            assert received, f"groups {servable} were free but nothing came"

    @precondition(lambda self: any(m.handles for g in GROUPS for m in self.groups[g]) or self.deleted)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        candidates = [m for g in GROUPS for m in self.groups[g] if m.handles] + self.deleted
        live = data.draw(st.sampled_from(candidates))
        handle = data.draw(st.sampled_from(live.handles))
        ok = live not in self.deleted and handle == live.handle and live.hidden_until > self.clock()
        try:
            self.queue.delete(handle)
        except durableq.ReceiptHandleIsInvalid:
            assert not ok, "the latest handle of a message in flight must delete it"
        else:
            assert ok, "only the latest handle of a message in flight may delete on FIFO"
            self.groups[live.group].remove(live)
            self.deleted.append(live)

    @precondition(lambda self: any(m.handles for g in GROUPS for m in self.groups[g]))
    @rule(data=st.data(), timeout=st.integers(0, 40))
    def change_visibility(self, data: st.DataObject, timeout: int) -> None:
        live = data.draw(st.sampled_from([m for g in GROUPS for m in self.groups[g] if m.handles]))
        handle = data.draw(st.sampled_from(live.handles))
        try:
            self.queue.change_visibility(handle, timeout)
        except durableq.MessageNotInflight:
            assert handle != live.handle
        else:
            assert handle == live.handle
            live.hidden_until = self.clock() + timeout

    @rule(seconds=st.sampled_from([0.5, 1, 5, 10, 30, 45]))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def depth_matches_the_model(self) -> None:
        stats = self.queue.stats()
        live = [m for g in GROUPS for m in self.groups[g]]
        in_flight = sum(m.hidden_until > self.clock() for m in live)
        assert stats.approximate_number_of_messages_not_visible == in_flight
        assert stats.approximate_number_of_messages == len(live) - in_flight


TestFifoProperties = FifoMachine.TestCase
TestFifoProperties.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
