"""``JournaledQueue``: a durableq.Queue that journals every call a role makes.

Producers, consumers and ``durableq.Worker`` (which takes any object with the
Queue methods it calls) all go through it, so every process journals the
same way and the checker has one format to read:

- ``send-intent`` / ``sent``, ``batch-intent`` / ``batch-sent``: the body (unique
  per send) before the call, the message id and sequence number after it;
- ``recv``: wall time before and after the call, the visibility timeout, and
  every message returned (id, body, handle, receive count, sequence, group);
- ``del-intent`` / ``deleted``, ``delb-intent`` / ``delb-done``, ``cv-intent`` /
  ``cv-done``: intent with the time before, result with the time after;
- ``error``: a DurableQError (code, message, the time before and after).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import durableq

from .journal import Journal

T = TypeVar("T")


class JournaledQueue:
    """Duck-types ``durableq.Queue`` for the calls roles and ``durableq.Worker`` make."""

    def __init__(self, queue: durableq.Queue, journal: Journal, visibility_timeout: int) -> None:
        self._queue = queue
        self._journal = journal
        self._visibility_timeout = visibility_timeout
        self._held: dict[str, str] = {}  # receipt handle -> message id, for delete and cv lines

    @property
    def name(self) -> str:
        return self._queue.name

    @property
    def fifo(self) -> bool:
        return self._queue.fifo

    def attributes(self) -> dict[str, Any]:
        return self._queue.attributes()

    def stats(self) -> durableq.QueueStats:
        return self._queue.stats()

    def _call(self, op: str, call: Callable[[], T], **context: Any) -> tuple[T, float, float]:
        """Run ``call``; journal a DurableQError with its times, then re-raise it."""
        before = time.time()
        try:
            result = call()
        except durableq.DurableQError as exc:
            self._journal.write(
                "error",
                q=self.name,
                op=op,
                code=exc.code,
                msg=exc.message,
                b=before,
                a=time.time(),
                **context,
            )
            raise
        return result, before, time.time()

    # -- sending ------------------------------------------------------------

    def send(self, body: str, **options: Any) -> durableq.SendResult:
        group = options.get("group_id")
        self._journal.write("send-intent", q=self.name, body=body, g=group)
        result, _, _ = self._call("send", lambda: self._queue.send(body, **options), body=body)
        self._journal.write(
            "sent", q=self.name, body=body, g=group, id=result.message_id, seq=result.sequence_number
        )
        return result

    def send_batch(self, entries: Sequence[durableq.SendEntry]) -> durableq.BatchResult:
        bodies = {entry.id: entry.body for entry in entries}
        self._journal.write(
            "batch-intent", q=self.name, bodies=list(bodies.values()), g=[e.group_id for e in entries]
        )
        result, _, _ = self._call(
            "send_batch", lambda: self._queue.send_batch(entries), bodies=list(bodies.values())
        )
        self._journal.write(
            "batch-sent",
            q=self.name,
            ok=[[bodies[s.id], s.message_id, s.sequence_number] for s in result.successful],
            failed=[[bodies[f.id], f.code, f.message] for f in result.failed],
        )
        return result

    # -- receiving ----------------------------------------------------------

    def receive(
        self, max_messages: int = 1, *, visibility_timeout: int | None = None, **options: Any
    ) -> list[durableq.Message]:
        timeout = self._visibility_timeout if visibility_timeout is None else visibility_timeout
        messages, before, after = self._call(
            "receive", lambda: self._queue.receive(max_messages, visibility_timeout=timeout, **options)
        )
        self._journal.write(
            "recv",
            q=self.name,
            b=before,
            a=after,
            vt=timeout,
            m=[
                [m.message_id, m.body, m.receipt_handle, m.receive_count, m.sequence_number, m.group_id]
                for m in messages
            ],
        )
        for message in messages:
            self._held[message.receipt_handle] = message.message_id
        return messages

    def delete(self, receipt_handle: str) -> None:
        message_id = self._held.get(receipt_handle)
        self._journal.write("del-intent", q=self.name, id=message_id, h=receipt_handle, b=time.time())
        self._call("delete", lambda: self._queue.delete(receipt_handle), id=message_id, h=receipt_handle)
        self._journal.write("deleted", q=self.name, id=message_id, h=receipt_handle, a=time.time())
        self._held.pop(receipt_handle, None)

    def delete_batch(self, handles: Sequence[str]) -> durableq.BatchResult:
        items = [[self._held.get(h), h] for h in handles]
        before = time.time()
        self._journal.write("delb-intent", q=self.name, items=items, b=before)
        result, _, after = self._call("delete_batch", lambda: self._queue.delete_batch(list(handles)))
        done = {int(s.id) for s in result.successful}
        self._journal.write("delb-done", q=self.name, ok=[items[i] for i in sorted(done)], a=after)
        for failure in result.failed:
            message_id, handle = items[int(failure.id)]
            self._journal.write(
                "error",
                q=self.name,
                op="delete",
                code=failure.code,
                msg=failure.message,
                b=before,
                a=after,
                id=message_id,
                h=handle,
                batch_entry=True,
            )
        for handle in handles:
            self._held.pop(handle, None)
        return result

    def change_visibility(self, receipt_handle: str, timeout: int) -> None:
        message_id = self._held.get(receipt_handle)
        self._journal.write(
            "cv-intent", q=self.name, id=message_id, h=receipt_handle, to=timeout, b=time.time()
        )
        self._call(
            "change_visibility",
            lambda: self._queue.change_visibility(receipt_handle, timeout),
            id=message_id,
            h=receipt_handle,
        )
        self._journal.write("cv-done", q=self.name, id=message_id, h=receipt_handle, a=time.time())
