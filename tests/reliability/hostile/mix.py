"""``Hand``: one thread's share of the mix, on one broker.

Writes to the checked queues go through :class:`~tests.reliability.journaled.JournaledQueue`
(so the checker sees every send, receive, delete and change of visibility,
with stale handles among the good ones); failing writes, invalid arguments,
reads and the management of scratch queues go to the library directly, each
with the errors it may meet (:class:`.caller.Caller`).  A failing write is
often followed at once by a read on the same thread: the combination that
lost acknowledged sends in group commit.  The rarer calls (workers,
temporary queues, forks, short-lived threads, a second broker) are in
:mod:`.extras`.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import durableq
from durableq import SendEntry

from ..journal import Journal
from ..journaled import JournaledQueue
from . import layout
from .caller import Caller, pick


#: Handles that cannot name any message: each delete or change with one must be refused.
def _garbage(rng: random.Random) -> str:
    return rng.choice(
        ["bad handle", "", "x" * 2000, secrets.token_hex(24), "AQEB" + secrets.token_urlsafe(60)]
    )


class Hand(Caller):
    """One thread of a hostile process: call :meth:`step` until the run is over."""

    def __init__(
        self, proc: Any, broker: durableq.Broker, rng: random.Random, tag: str, journal: Journal
    ) -> None:
        super().__init__(journal, proc.busy)
        self.proc = proc
        self.broker = broker
        self.rng = rng
        self.tag = tag
        self.sent = 0
        self.checked = {
            name: JournaledQueue(broker.get_queue(name), journal, layout.VISIBILITY)
            for name in layout.CHECKED
        }
        self.held: dict[str, list[str]] = defaultdict(list)  # handles received and not yet used
        self.old: list[tuple[str, str]] = []  # handles already used or left to time out: stale
        self.table: list[tuple[float, Callable[[], object]]] = [
            (24, self.send),
            (7, self.send_batch),
            (10, self.receive),
            (8, self.delete_held),
            (3, self.delete_batch_held),
            (3, self.change_held),
            (3, self.stale),
            (8, self.fail_then_read),
            (5, self.failing_write),
            (3, self.invalid),
            (6, self.read),
            (3, self.scratch),
            (2, self.extra),
            (4, self.transaction),
        ]
        if proc.buffered is not None:
            self.table.append((4, self.buffered_send))

    def step(self) -> None:
        pick(self.rng, self.table)()

    # -- bodies -------------------------------------------------------------

    def body(self, queue: str) -> str:
        """A body no other send of the run has; on the large-payload queue, over its row limit."""
        self.sent += 1
        text = f"{self.tag}.{self.sent}"
        if queue == layout.BIG and self.rng.random() < 0.7:
            text += "." + "b" * self.rng.randint(layout.BIG_LIMIT, 6 * layout.BIG_LIMIT)
        return text

    def options(self, queue: str, body: str) -> dict[str, Any]:
        if queue == layout.FIFO:
            options: dict[str, Any] = {"group_id": self.rng.choice(layout.GROUPS)}
            if self.rng.random() < 0.3:  # explicit, and as unique as the body
                options["deduplication_id"] = hashlib.sha256(body.encode()).hexdigest()
            return options
        tenant = {"group_id": self.rng.choice(("t1", "t2", "t3"))} if self.rng.random() < 0.5 else {}
        if self.rng.random() < 0.1:
            return {"delay_seconds": 1, **tenant}
        return tenant

    # -- the checked queues (journaled) -------------------------------------------

    def send(self) -> None:
        name = self.rng.choice(layout.CHECKED)
        body = self.body(name)
        self.call("send", lambda: self.checked[name].send(body, **self.options(name, body)), judged=True)

    def send_batch(self) -> None:
        name = self.rng.choice(layout.CHECKED)
        entries = []
        for i in range(self.rng.randint(2, 10)):
            body = self.body(name)
            entries.append(SendEntry(str(i), body, **self.options(name, body)))
        result = self.call("send_batch", lambda: self.checked[name].send_batch(entries), judged=True)
        if result is not None:
            self.check("send_batch", not result.failed, f"entries failed: {result.failed}")

    def buffered_send(self) -> None:
        """A send through the process's BufferedQueue: journaled when its future resolves."""
        body = self.body(layout.STANDARD) + ".buf"  # a report shows which sends were buffered
        self.journal.write("send-intent", q=layout.STANDARD, body=body, g=None)
        future = self.call("buffered.send", lambda: self.proc.buffered.send(body))
        if future is not None:
            future.add_done_callback(lambda done: self._resolved(body, done))

    def _resolved(self, body: str, future: Any) -> None:
        error = future.exception()
        if error is None:
            result = future.result()
            self.journal.write("sent", q=layout.STANDARD, body=body, g=None, id=result.message_id, seq=None)
        elif isinstance(error, durableq.DurableQError):  # the checker judges it (a send may not fail)
            self.journal.write(
                "error", q=layout.STANDARD, op="send", code=error.code, msg=error.message, body=body
            )
        else:
            self.bad("buffered.send", error)

    def receive(self, wait: int | None = None) -> None:
        name = self.rng.choice(layout.CHECKED)
        wait = self.rng.choice([0, 0, 1]) if wait is None else wait
        messages = self.call(
            "receive" if wait == 0 else "receive.long_poll",
            lambda: self.checked[name].receive(
                self.rng.randint(1, 10), visibility_timeout=self.rng.choice([1, 2, 3]), wait_time=wait
            ),
            judged=True,
        )
        for message in messages or []:
            if name == layout.BIG:
                self.call("body", lambda m=message: m.body)  # read from the payload store
            self.held[name].append(message.receipt_handle)
        for queue, handles in self.held.items():  # the oldest are left to their visibility timeout
            while len(handles) > 20:
                self._retire(queue, handles.pop(0))

    def receive_long(self) -> None:
        self.receive(wait=1)

    def idle_long_poll(self) -> None:
        """A long poll that waits its whole second (on a queue nobody sends to)."""
        queue = self.broker.get_queue(layout.IDLE)
        self.call("receive.idle", lambda: queue.receive(1, wait_time=1))

    def _retire(self, name: str, handle: str) -> None:
        self.old.append((name, handle))
        del self.old[:-50]

    def _held(self) -> tuple[str, str] | None:
        names = [name for name, handles in self.held.items() if handles]
        if not names:
            return None
        name = self.rng.choice(names)
        handles = self.held[name]
        handle = handles.pop(self.rng.randrange(len(handles)))
        self._retire(name, handle)
        return name, handle

    def delete_held(self) -> None:
        held = self._held()
        if held is not None:
            self.call("delete", lambda: self.checked[held[0]].delete(held[1]), judged=True)

    def delete_batch_held(self) -> None:
        names = [name for name, handles in self.held.items() if handles]
        if not names:
            return
        name = self.rng.choice(names)
        handles, self.held[name] = self.held[name][:10], self.held[name][10:]
        for handle in handles:
            self._retire(name, handle)
        self.call("delete_batch", lambda: self.checked[name].delete_batch(handles), judged=True)

    def change_held(self) -> None:
        held = self._held()
        if held is not None:
            timeout = self.rng.choice([0, 1, 3])
            self.call(
                "change_visibility",
                lambda: self.checked[held[0]].change_visibility(held[1], timeout),
                judged=True,
            )

    def stale(self) -> None:
        """A delete or change of visibility with a handle already used or left to time out."""
        if not self.old:
            return
        name, handle = self.rng.choice(self.old)
        if self.rng.random() < 0.7:
            self.call("delete.stale", lambda: self.checked[name].delete(handle), judged=True)
        else:
            self.call(
                "change_visibility.stale",
                lambda: self.checked[name].change_visibility(handle, 1),
                judged=True,
            )

    # -- failing writes and invalid arguments (not journaled as intents: they may change nothing) --

    def raw(self, name: str | None = None) -> durableq.Queue:
        return self.broker.get_queue(name or self.rng.choice(layout.CHECKED))

    def failing_write(self) -> None:
        queue, handle = self.raw(), _garbage(self.rng)
        roll = self.rng.random()
        refused = ["ReceiptHandleIsInvalid", "InvalidParameterValue"]
        if roll < 0.5:
            self.call("delete.bad", lambda: queue.delete(handle), refused, fail=True)
        elif roll < 0.8:
            self.call("change_visibility.bad", lambda: queue.change_visibility(handle, 5), refused, fail=True)
        else:
            result = self.call(
                "delete_batch.bad", lambda: queue.delete_batch([handle, handle + "2"]), refused
            )
            if result is not None:
                self.check("delete_batch.bad", not result.successful, f"a bad handle deleted: {result}")

    def fail_then_read(self) -> None:
        self.failing_write()
        self.read()

    def invalid(self) -> None:
        queue = self.raw(self.rng.choice([layout.STANDARD, layout.FIFO]))
        body = self.body(queue.name) + ".never"  # must never be stored: the checker would call it a phantom
        cases: list[tuple[str, Callable[[], object], list[str], bool]] = [
            ("send.invalid", lambda: queue.send(body, delay_seconds=-1), ["InvalidParameterValue"], False),
            ("send.invalid", lambda: queue.send(body, delay_seconds=10**6), ["InvalidParameterValue"], False),
            ("send.wrong_type", lambda: queue.send(12345), ["InvalidParameterValue"], True),  # type: ignore[arg-type]
            ("receive.invalid", lambda: queue.receive(0), ["InvalidParameterValue"], False),
            ("receive.invalid", lambda: queue.receive(1, wait_time=-3), ["InvalidParameterValue"], False),
            ("send_batch.empty", lambda: queue.send_batch([]), ["EmptyBatchRequest"], False),
            (
                "get_queue.missing",
                lambda: self.broker.get_queue("hx-no-such-queue"),
                ["QueueDoesNotExist"],
                False,
            ),
            (
                "create_queue.invalid",
                lambda: self.broker.create_queue("bad name!"),
                ["InvalidParameterValue"],
                False,
            ),
            (
                "create_queue.clash",
                lambda: self.broker.create_queue(layout.STANDARD, visibility_timeout=7),
                ["QueueNameExists"],
                False,
            ),
            (
                "events.invalid",
                lambda: self.broker.message_events(after=-1),
                ["InvalidParameterValue"],
                False,
            ),
            ("audit.invalid", lambda: self.broker.audit(limit=0), ["InvalidParameterValue"], False),
        ]
        if queue.fifo:
            cases.append(
                (
                    "send.no_group",
                    lambda: queue.send(body),
                    ["MissingParameter", "InvalidParameterValue"],
                    False,
                )
            )
        op, function, codes, wrong_types = self.rng.choice(cases)
        self.call(op, function, codes, fail=True, wrong_types=wrong_types)

    # -- reads --------------------------------------------------------------

    def read(self) -> None:
        queue = self.raw()
        b = self.broker
        reads: list[tuple[str, Callable[[], object]]] = [
            (
                "peek",
                lambda: queue.peek(state=self.rng.choice([None, "visible", "in_flight", "delayed"]), limit=5),
            ),
            ("stats", queue.stats),
            ("attributes", queue.attributes),
            ("tags", queue.tags),
            ("metrics", queue.metrics),
            ("events", lambda: queue.events(limit=20)),
            ("list_queues", b.list_queues),
            ("audit", lambda: b.audit(limit=5)),
            ("message_events", lambda: b.message_events(after=max(b.newest_event_id() - 30, 0), limit=50)),
            ("newest_event_id", b.newest_event_id),
            ("dead_letter_source_queues", lambda: b.dead_letter_source_queues(layout.SPIN_DLQ)),
            ("list_message_moves", lambda: b.list_message_moves(layout.SPIN_DLQ)),
        ]
        op, function = self.rng.choice(reads)
        self.call(op, function, ["QueueDoesNotExist", "ResourceNotFoundException"])

    # -- scratch queues: created, used, purged and deleted under everyone's feet -----------

    def scratch(self) -> None:
        name = self.rng.choice(layout.SCRATCH)
        gone = ["QueueDoesNotExist"]
        roll = self.rng.random()
        if roll < 0.15:
            self.call("create_queue", lambda: layout.create_scratch(self.broker, name))
        elif roll < 0.25:
            self.call("delete_queue", lambda: self.broker.delete_queue(name), gone)
        elif roll < 0.35:
            self.call("purge", lambda: self.broker.get_queue(name).purge(), gone)
        elif roll < 0.55:
            extra = {"group_id": "g"} if name.endswith(".fifo") else {}
            self.call("scratch.send", lambda: self.broker.get_queue(name).send("scratch", **extra), gone)
        elif roll < 0.75:
            got = self.call("scratch.receive", lambda: self.broker.get_queue(name).receive(10), gone)
            if got:
                handles = [m.receipt_handle for m in got]
                self.call(
                    "scratch.delete_batch", lambda: self.broker.get_queue(name).delete_batch(handles), gone
                )
        elif roll < 0.85:
            self.call(
                "set_attributes", lambda: self.broker.get_queue(name).set_attributes(delay_seconds=0), gone
            )
        elif roll < 0.95:
            target = self.raw()
            self.call("tag", lambda: target.tag(owner=self.tag[:100]))
            self.call("untag", lambda: target.untag("owner", "never-set"))
        else:
            self.call(
                "set_attributes", lambda: self.raw().set_attributes(visibility_timeout=layout.VISIBILITY)
            )

    def transaction(self) -> None:
        """Sends, receives and deletes inside a transaction, beside an application row (see
        :mod:`.transactions`)."""
        from . import transactions

        transactions.one(self)

    def extra(self) -> None:
        from . import extras

        extras.one(self)
