"""The journals of a run, read back as the story of each message."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .journal import Entry

#: The database stores milliseconds: its clock reading may trail a "before" we took by up to 1 ms.
TOLERANCE = 0.002
#: Journal lines that report a call that returned.
_OPERATIONS = {"sent", "batch-sent", "recv", "deleted", "delb-done", "cv-done"}
#: Intent lines, the lines that close them, and the error ops that close them instead; by kind of call.
_INTENTS = {
    "send-intent": "sends",
    "batch-intent": "batches",
    "del-intent": "deletes",
    "delb-intent": "batch deletes",
}
_RESULTS = {"sent": "sends", "batch-sent": "batches", "deleted": "deletes", "delb-done": "batch deletes"}
_ERROR_OPS = {"send": "sends", "send_batch": "batches", "delete": "deletes", "delete_batch": "batch deletes"}


@dataclass(slots=True)
class Receipt:
    """One message as one logged receive returned it."""

    message_id: str
    handle: str
    count: int  # the message's receive count: the order of its receives, across processes
    before: float
    after: float
    visibility_timeout: int
    call: tuple[str, int]  # journal file and line of the receive
    position: int  # place in the list the receive returned


@dataclass(slots=True)
class Story:
    """Everything the journals say about one message."""

    message_id: str
    queue: str
    body: str
    group: str | None = None
    sequence: int | None = None
    send_returned: bool = False
    receipts: list[Receipt] = field(default_factory=list)
    delete_intents: dict[str, float] = field(default_factory=dict)  # handle -> earliest time before
    deleted_at: float | None = None  # time after the first delete that returned
    releases: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))

    def lease_end(self, receipt: Receipt) -> float:
        """The earliest moment the holder of ``receipt`` may have lost the message.

        A receive hides it at least until before + timeout; a change of
        visibility with that handle (extend or release) may have moved the end
        to its own before + timeout.  The smallest of these is a sound bound
        even when a change failed or its result was never logged.
        """
        ends = [receipt.before + receipt.visibility_timeout]
        ends += [before + timeout for before, timeout in self.releases.get(receipt.handle, [])]
        return min(ends)


@dataclass(slots=True)
class Intent:
    """A body some process meant to send: to which queue and group, alone or in a batch."""

    queue: str
    group: str | None
    batch: tuple[str, int] | None


@dataclass(slots=True)
class Incarnation:
    """One process run: its role, the queues it receives from, and whether it ended cleanly."""

    role: str
    receives_from: list[str]
    stopped: bool = False


class History:
    """Every journal line of a run, by message."""

    def __init__(self, entries: list[Entry]) -> None:
        self.intents: dict[str, Intent] = {}
        self.batches: dict[tuple[str, int], list[str]] = {}
        self.stories: dict[str, Story] = {}
        self.ids_of_body: dict[str, set[str]] = defaultdict(set)
        self.errors: list[Entry] = []
        self.batch_failures: list[Entry] = []
        self.received: Counter[str] = Counter()  # messages returned, by queue
        self.empty_receives: Counter[str] = Counter()
        self.incarnations: dict[str, Incarnation] = {}
        self.receipt_of_handle: dict[str, Receipt] = {}
        self.operations = sum(entry.kind in _OPERATIONS for entry in entries)
        # (journal, kind) -> intents not yet matched by a result or an error
        self._open_calls: Counter[tuple[str, str]] = Counter()
        for entry in entries:
            if entry.kind in _INTENTS:
                self._open_calls[(entry.source, _INTENTS[entry.kind])] += 1
            elif entry.kind in _RESULTS or (
                entry.kind == "error" and entry["op"] in _ERROR_OPS and not entry.get("batch_entry")
            ):
                key = _RESULTS.get(entry.kind) or _ERROR_OPS[entry["op"]]
                self._open_calls[(entry.source, key)] -= 1
        for entry in entries:
            getattr(self, "_" + entry.kind.replace("-", "_"), self._ignore)(entry)

    # -- questions ------------------------------------------------------------

    def interrupted(self) -> Counter[str]:
        """Calls a kill cut between their intent and their result, by kind (sends, batches, deletes)."""
        cut: Counter[str] = Counter()
        for (_, kind), open_calls in self._open_calls.items():
            cut[kind] += max(open_calls, 0)
        return cut

    def killed(self, queue: str | None = None) -> int:
        """Process runs that never logged a clean stop (receiving from ``queue``, if given)."""
        return sum(
            1
            for run in self.incarnations.values()
            if not run.stopped and (queue is None or queue in run.receives_from)
        )

    def story_of_handle(self, handle: str) -> tuple[Story, Receipt] | None:
        receipt = self.receipt_of_handle.get(handle)
        return None if receipt is None else (self.stories[receipt.message_id], receipt)

    # -- one method per journal line kind -------------------------------------

    def _ignore(self, entry: Entry) -> None:
        pass

    def _story(self, message_id: str, queue: str, body: str) -> Story:
        story = self.stories.get(message_id)
        if story is None:
            story = self.stories[message_id] = Story(message_id, queue, body)
        self.ids_of_body[body].add(message_id)
        return story

    def _start(self, entry: Entry) -> None:
        self.incarnations[entry.source] = Incarnation(entry["role"], entry.get("receives_from", []))

    def _stop(self, entry: Entry) -> None:
        self.incarnations[entry.source].stopped = True

    def _send_intent(self, entry: Entry) -> None:
        self.intents[entry["body"]] = Intent(entry["q"], entry["g"], None)

    def _batch_intent(self, entry: Entry) -> None:
        key = (entry.source, entry.line)
        self.batches[key] = entry["bodies"]
        for body, group in zip(entry["bodies"], entry["g"]):
            self.intents[body] = Intent(entry["q"], group, key)

    def _returned_send(self, queue: str, body: str, message_id: str, sequence: str | None) -> None:
        story = self._story(message_id, queue, body)
        story.send_returned = True
        story.group = self.intents[body].group
        story.sequence = None if sequence is None else int(sequence)

    def _sent(self, entry: Entry) -> None:
        self._returned_send(entry["q"], entry["body"], entry["id"], entry["seq"])

    def _batch_sent(self, entry: Entry) -> None:
        for body, message_id, sequence in entry["ok"]:
            self._returned_send(entry["q"], body, message_id, sequence)
        if entry["failed"]:
            self.batch_failures.append(entry)

    def _recv(self, entry: Entry) -> None:
        queue = entry["q"]
        if not entry["m"]:
            self.empty_receives[queue] += 1
        for position, (message_id, body, handle, count, sequence, group) in enumerate(entry["m"]):
            story = self._story(message_id, queue, body)
            story.group = group
            if story.sequence is None and sequence is not None:  # the send's, when it was logged
                story.sequence = int(sequence)
            receipt = Receipt(
                message_id,
                handle,
                count,
                entry["b"],
                entry["a"],
                entry["vt"],
                (entry.source, entry.line),
                position,
            )
            story.receipts.append(receipt)
            self.receipt_of_handle[handle] = receipt
            self.received[queue] += 1

    def _delete_intent(self, handle: str, before: float) -> None:
        found = self.story_of_handle(handle)
        if found is not None:
            intents = found[0].delete_intents
            intents[handle] = min(intents.get(handle, before), before)

    def _deleted_now(self, handle: str, after: float) -> None:
        found = self.story_of_handle(handle)
        if found is not None:
            story = found[0]
            story.deleted_at = after if story.deleted_at is None else min(story.deleted_at, after)

    def _del_intent(self, entry: Entry) -> None:
        self._delete_intent(entry["h"], entry["b"])

    def _deleted(self, entry: Entry) -> None:
        self._deleted_now(entry["h"], entry["a"])

    def _delb_intent(self, entry: Entry) -> None:
        for _, handle in entry["items"]:
            self._delete_intent(handle, entry["b"])

    def _delb_done(self, entry: Entry) -> None:
        for _, handle in entry["ok"]:
            self._deleted_now(handle, entry["a"])

    def _cv_intent(self, entry: Entry) -> None:
        found = self.story_of_handle(entry["h"])
        if found is not None:
            found[0].releases[entry["h"]].append((entry["b"], entry["to"]))

    def _error(self, entry: Entry) -> None:
        self.errors.append(entry)
