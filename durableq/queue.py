"""``Queue``: the public handle on one queue: its messages (``QueueHandle``) and the queue itself."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from . import limits, validation
from .handle import QueueHandle
from .ops import audit, queue_calls
from .types import MessageEvent, QueueStats
from .virtual import VirtualQueue


def _this_queue(queue: QueueHandle, *args: object, **kwargs: object) -> str:
    """The queue an audited method of a Queue acts on: its own."""
    return queue.name


class Queue(QueueHandle):
    """A queue of an open broker.  Cheap to create; safe to share between threads."""

    def __repr__(self) -> str:
        kind = "FIFO" if self._fifo else "standard"
        return f"<durableq.Queue {self._name!r} ({kind}) in {self._rt.db.name!r}>"

    # -- settings and state ---------------------------------------------------

    def attributes(self) -> dict[str, Any]:
        """The queue's settings, and when it was created and last changed."""
        return queue_calls.attributes(self._rt, self._name)

    @audit.audited("SetQueueAttributes", _this_queue)
    def set_attributes(self, /, **changes: Any) -> None:
        """Change settings (the keyword names of ``create_queue``, except ``fifo`` and ``tags``)."""
        queue_calls.set_attributes(self._rt, self._name, changes)

    def stats(self) -> QueueStats:
        """Approximate depth by state and the age of the oldest message; reads no full table."""
        return queue_calls.queue_stats(self._rt, self._name)

    def events(
        self,
        *,
        since: datetime | None = None,
        after: int | None = None,
        limit: int = limits.DEFAULT_EVENT_LIMIT,
    ) -> list[MessageEvent]:
        """The queue's message history, oldest first (kept only while the queue's ``history`` is on):
        sent, received, visibility_changed, deleted, moved_to_dead_letter, moved_out, moved_in, expired,
        purged.  ``since``: from that time on; ``after``: events whose ``event_id`` is above it (to
        resume); at most ``limit`` (1-100,000)."""
        return queue_calls.events(self._rt, self._name, since, after, limit)

    @audit.audited("AddPermission", _this_queue)
    def add_permission(
        self, label: str, account_ids: Sequence[str], actions: Sequence[str], *, resource: str | None = None
    ) -> None:
        """Add a statement to the queue's access policy (kept for SQS clients, not enforced)."""
        queue_calls.add_permission(self._rt, self._name, label, account_ids, actions, resource)

    @audit.audited("RemovePermission", _this_queue)
    def remove_permission(self, label: str) -> None:
        """Remove the access-policy statement named ``label``."""
        queue_calls.remove_permission(self._rt, self._name, label)

    @audit.audited("PurgeQueue", _this_queue)
    def purge(self) -> None:
        """Remove every message, in every state, and forget FIFO deduplication ids."""
        queue_calls.purge(self._rt, self._name)

    # -- tags -------------------------------------------------------------------

    @audit.audited("TagQueue", _this_queue)
    def tag(self, /, **tags: str) -> None:
        """Add or replace tags (key 1-128 characters, value 0-256, at most 50 per queue)."""
        queue_calls.tag(self._rt, self._name, tags)

    @audit.audited("UntagQueue", _this_queue)
    def untag(self, *keys: str) -> None:
        """Remove tags; keys that are not there are ignored."""
        queue_calls.untag(self._rt, self._name, keys)

    # -- virtual queues -----------------------------------------------------------

    def virtual_queue(self, name: str) -> VirtualQueue:
        """A virtual queue of this (standard) queue: its messages live in this queue but are received
        only through it.  Creating one writes nothing (no queue row, no schema change): it exists
        while it holds messages; see :class:`~durableq.VirtualQueue`."""
        validation.virtual_queue_name(name)
        validation.virtual_host(self._name, self._fifo)
        return VirtualQueue(self, name)
