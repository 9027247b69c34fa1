"""The invariants, checked on the journals of a run and the database (a SQLite file or a
PostgreSQL database) after each round.

1. Nothing acknowledged is lost: every message a send returned (or a receive
   showed) is stored, or some process tried to delete it with a receipt handle.
2. A deleted message never comes back: not stored, never received after the
   delete returned.
3. No two holders inside a visibility window: receive counts order the
   receives of a message across processes, and the next one may only end
   after the previous one's lease could have ended.
4. (after a drain) Every message was delivered, and FIFO groups in send order.
5. ``stats()`` matches the rows; counters are exact after a clean run and
   never above the truth after kills.

Besides: no message appears from nowhere or twice, a killed batch left all of
its messages or none, and every DurableQError a process saw was legitimate.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import durableq

from . import store
from .history import TOLERANCE, History, Story
from .journal import read_journals

#: Errors a delete or change of visibility may legitimately meet once its lease may have ended.
_LATE_CODES = {"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue"}
_SHOWN = 25


@dataclass
class Problems:
    found: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.found.append(text)

    def raise_if_any(self, where: str) -> None:
        if self.found:
            shown = "\n  ".join(self.found[:_SHOWN])
            more = f"\n  ... and {len(self.found) - _SHOWN} more" if len(self.found) > _SHOWN else ""
            raise AssertionError(f"{len(self.found)} invariant violations in {where}:\n  {shown}{more}")


def _describe(story: Story) -> str:
    return f"message {story.message_id} (body {story.body!r}, queue {story.queue!r})"


# -- 1 and 2: nothing lost, nothing back ------------------------------------------


def check_nothing_lost(history: History, stored: Mapping[str, list[store.Row]], problems: Problems) -> None:
    for story in history.stories.values():
        if story.message_id not in stored and not story.delete_intents:
            how = "a send returned it" if story.send_returned else "a receive returned it"
            problems.add(f"LOST: {_describe(story)}: {how}, but it is not stored and no process deleted it")


def check_deleted_stay_deleted(
    history: History, stored: Mapping[str, list[store.Row]], problems: Problems
) -> None:
    for story in history.stories.values():
        if story.deleted_at is None:
            continue
        if story.message_id in stored:
            problems.add(
                f"BACK: {_describe(story)}: a delete returned at {story.deleted_at:.3f}, but it is stored"
            )
        for receipt in story.receipts:
            if receipt.before > story.deleted_at:
                problems.add(
                    f"BACK: {_describe(story)}: deleted at {story.deleted_at:.3f}, received again by "
                    f"{receipt.call[0]}:{receipt.call[1]} which started at {receipt.before:.3f}"
                )


# -- 3: one holder at a time ------------------------------------------------------


def check_one_holder(history: History, problems: Problems) -> None:
    for story in history.stories.values():
        receipts = sorted(story.receipts, key=lambda r: r.count)
        for previous, current in itertools.pairwise(receipts):
            if previous.count == current.count:
                problems.add(
                    f"TWICE: {_describe(story)}: two receives returned receive count {current.count} "
                    f"({previous.call[0]}:{previous.call[1]} and {current.call[0]}:{current.call[1]})"
                )
                continue
            lease_end = story.lease_end(previous)
            if current.after < lease_end - TOLERANCE:
                problems.add(
                    f"TWO HOLDERS: {_describe(story)}: receive {previous.count} at {previous.call[0]}:"
                    f"{previous.call[1]} (from {previous.before:.3f}, "
                    f"visibility {previous.visibility_timeout} s, "
                    f"held until at least {lease_end:.3f}) and receive {current.count} at {current.call[0]}:"
                    f"{current.call[1]}, which had returned by {current.after:.3f}"
                )


def check_fifo_groups_blocked(history: History, problems: Problems) -> None:
    """While one message of a FIFO group is held, no other message of the group is handed out."""
    by_group: dict[tuple[str, str], list[tuple[float, Story, int]]] = defaultdict(list)
    for story in history.stories.values():
        if story.group is not None and story.queue.endswith(".fifo"):
            for index, receipt in enumerate(story.receipts):
                by_group[(story.queue, story.group)].append((receipt.before, story, index))
    for (queue, group), held in by_group.items():
        held.sort(key=lambda item: item[0])
        starts = [item[0] for item in held]
        for _, story, index in held:
            receipt = story.receipts[index]
            # Held from its commit (by receipt.after) until its lease may have ended (the database's
            # clock: with its tolerance) or its delete began (our clock: exact).
            until = min(
                story.lease_end(receipt) - TOLERANCE, story.delete_intents.get(receipt.handle, float("inf"))
            )
            first = bisect.bisect_right(starts, receipt.after)
            for _, other, other_index in held[first:]:
                other_receipt = other.receipts[other_index]
                if other_receipt.before >= until:
                    break
                if other is not story and other_receipt.after < until:
                    problems.add(
                        f"GROUP HELD: FIFO group {group!r} of {queue!r}: {_describe(other)} "
                        "was handed out at "
                        f"{other_receipt.call[0]}:{other_receipt.call[1]} while {_describe(story)} was held "
                        f"(until at least {until:.3f})"
                    )


# -- 4: delivered, in order ---------------------------------------------------------


def check_all_delivered(
    history: History, stored: Mapping[str, list[store.Row]], queues: Iterable[str], problems: Problems
) -> None:
    drained = set(queues)
    for story in history.stories.values():
        if not story.receipts:
            problems.add(f"NEVER DELIVERED: {_describe(story)} was never received")
    for rows in stored.values():
        for row in rows:
            if row.queue in drained:
                problems.add(
                    f"LEFT: message {row.message_id} is still stored in {row.queue!r} after the drain"
                )


def check_fifo_order(history: History, problems: Problems) -> None:
    """For each group, the first receive of message i precedes the first receive of message j > i."""
    groups: dict[tuple[str, str], list[Story]] = defaultdict(list)
    for story in history.stories.values():
        if story.group is not None and story.receipts and story.queue.endswith(".fifo"):
            groups[(story.queue, story.group)].append(story)
    for (queue, group), stories in groups.items():
        stories.sort(key=lambda s: s.sequence or 0)  # FIFO messages always have one
        firsts = [min(s.receipts, key=lambda r: r.count) for s in stories]
        for (earlier, first_i), (later, first_j) in zip(zip(stories, firsts), zip(stories[1:], firsts[1:])):
            if first_i.call == first_j.call:
                out_of_order = first_j.position < first_i.position
            else:
                out_of_order = first_j.after < first_i.before  # j's receive had returned before i's began
            if out_of_order:
                problems.add(
                    f"ORDER: FIFO group {group!r} of {queue!r}: {_describe(later)} "
                    f"(sequence {later.sequence}) "
                    f"was first received before {_describe(earlier)} (sequence {earlier.sequence})"
                )


# -- the rest: phantoms, duplicates, batches, errors ------------------------------


def check_no_phantoms(
    history: History,
    stored: Mapping[str, list[store.Row]],
    dead_letters: Mapping[str, str],
    problems: Problems,
) -> None:
    """Every stored or received message was sent by someone, to that queue (or moved to its DLQ), once."""
    for message_id, rows in stored.items():
        if len(rows) > 1:
            problems.add(f"DUPLICATE ROWS: message {message_id} is stored {len(rows)} times")
        for row in rows:
            intent = history.intents.get(row.body)
            if intent is not None and row.queue not in (intent.queue, dead_letters.get(intent.queue)):
                problems.add(
                    f"MISPLACED: message {message_id} was sent to {intent.queue!r} but is in {row.queue!r}"
                )
    bodies: dict[str, set[str]] = defaultdict(set, {b: set(ids) for b, ids in history.ids_of_body.items()})
    for message_id, rows in stored.items():
        for row in rows:
            bodies[row.body].add(message_id)
    for body, ids in bodies.items():
        if body not in history.intents:
            problems.add(f"PHANTOM: messages {sorted(ids)} have body {body!r}, which nobody sent")
        elif len(ids) > 1:
            problems.add(f"DUPLICATED SEND: body {body!r} (sent once) became messages {sorted(ids)}")


def check_batches_whole(history: History, stored: Mapping[str, list[store.Row]], problems: Problems) -> None:
    """A send_batch, killed or not, left all of its messages or none."""
    exists = {row.body for rows in stored.values() for row in rows} | set(history.ids_of_body)
    for (source, line), bodies in history.batches.items():
        present = sum(body in exists for body in bodies)
        if present not in (0, len(bodies)):
            problems.add(
                f"TORN BATCH: the batch of {source}:{line} left {present} of its {len(bodies)} messages"
            )
    for entry in history.batch_failures:
        problems.add(f"BATCH ENTRY FAILED at {entry.source}:{entry.line}: {entry['failed']}")


def check_errors(history: History, problems: Problems) -> int:
    """Only a delete or change of visibility may fail, and only once its hold may have ended or some
    process (on a standard queue any holder, with any of its handles) began deleting the message;
    returns how many did."""
    late = 0
    for entry in history.errors:
        found = history.story_of_handle(entry.get("h", ""))
        legitimate = False
        if (
            entry["op"] in ("delete", "change_visibility")
            and entry["code"] in _LATE_CODES
            and found is not None
        ):
            story, receipt = found
            deleting = min(story.delete_intents.values(), default=float("inf"))
            legitimate = entry["a"] >= story.lease_end(receipt) - TOLERANCE or deleting < entry["a"]
        if legitimate:
            late += 1
        else:
            problems.add(
                f"ERROR at {entry.source}:{entry.line}: {entry['op']} on {entry['q']!r} raised "
                f"{entry['code']}: {entry['msg']}"
            )
    return late


# -- 5: stats and counters ----------------------------------------------------------


def check_stats(db: store.Location, stored: Mapping[str, list[store.Row]], problems: Problems) -> None:
    """stats()' visible + in flight + delayed equals the rows read outside the library, queue by queue."""
    per_queue = Counter(row.queue for rows in stored.values() for row in rows)
    with durableq.open(db) as broker:
        for name in broker.list_queues():
            stats = broker.get_queue(name).stats()
            total = (
                stats.approximate_number_of_messages
                + stats.approximate_number_of_messages_not_visible
                + stats.approximate_number_of_messages_delayed
            )
            if total != per_queue[name]:
                problems.add(
                    f"STATS: {name!r}: stats() counts {total} messages ({stats}); "
                    f"the database holds {per_queue[name]}"
                )


def check_counters(
    db: store.Location,
    history: History,
    stored: Mapping[str, list[store.Row]],
    queues: Iterable[str],
    dead_letters: Mapping[str, str],
    problems: Problems,
) -> None:
    """Exact after a clean run; never above the truth (or its upper bound) when processes were killed."""
    counts = store.counters(db)
    rows = [row for group in stored.values() for row in group]
    for queue in queues:
        known = {s.message_id for s in history.stories.values() if s.queue == queue}
        known |= {r.message_id for r in rows if r.queue == queue or r.dead_letter_source == queue}
        still_here = sum(r.queue == queue for r in rows)
        moved = sum(r.dead_letter_source == queue and r.queue == dead_letters.get(queue) for r in rows)
        killed = history.killed(queue)
        # A killed process may have received up to 10 messages (or an empty result) it never logged.
        bounds = {
            "sent": len(known),
            "received": history.received[queue] + 10 * killed,
            "deleted": len(known) - still_here - moved,
            "moved_to_dead_letter": moved,
            "expired": 0,
            "empty_receives": history.empty_receives[queue] + killed,
        }
        exact = history.killed() == 0
        for column, truth in bounds.items():
            value = counts[queue][column]
            if value > truth or (exact and value != truth):
                relation = "exactly" if exact else "at most"
                problems.add(f"COUNTER: {queue!r} counted {value} {column}; the run says {relation} {truth}")


def check_message_history(
    db: store.Location, history: History, stored: Mapping[str, list[store.Row]], problems: Problems
) -> int:
    """Queues with history on: each event exists exactly when its change committed, whatever was
    killed when.  Per message: one ``sent`` first; ``received`` events counting 1, 2, ... n (less any
    a put-back undid: a ``visibility_changed`` at the count before it), where
    n is the stored row's receive count; a gone message ends with one ``deleted`` at count n; every
    receive a journal logged has its event.  Returns how many messages were checked."""
    keeping = store.queues_with_history(db)
    if not keeping:
        return 0
    trails: dict[str, list[store.Event]] = defaultdict(list)
    for event in store.events(db):
        trails[event.message_id].append(event)
    for message_id, trail in trails.items():
        kinds = [e.event for e in trail]
        counts: list[int] = []
        for e in trail:
            if e.event == "received":
                counts.append(e.receive_count)
            elif e.event == "visibility_changed" and counts and e.receive_count == counts[-1] - 1:
                counts.pop()  # that receive undone: its client left before it got the message
        rows = stored.get(message_id, [])
        if kinds[0] != "sent" or kinds.count("sent") != 1:
            problems.add(f"HISTORY: {message_id} does not start with one sent event: {kinds}")
        if counts != list(range(1, len(counts) + 1)):
            problems.add(f"HISTORY: {message_id}'s received events count {counts}")
        if rows:
            if "deleted" in kinds or rows[0].receive_count != len(counts):
                problems.add(
                    f"HISTORY: {message_id} is stored, received {rows[0].receive_count} times, "
                    f"but its events are {kinds}"
                )
        elif kinds[-1] != "deleted" or kinds.count("deleted") != 1 or trail[-1].receive_count != len(counts):
            problems.add(f"HISTORY: {message_id} is gone but its events are {kinds}")
    for story in history.stories.values():
        if story.queue not in keeping:
            continue
        if story.message_id not in trails:
            if story.send_returned or story.receipts:
                problems.add(f"HISTORY: {_describe(story)} has no events")
            continue
        logged = {e.receive_count for e in trails[story.message_id] if e.event == "received"}
        missing = [r.count for r in story.receipts if r.count not in logged]
        if missing:
            problems.add(f"HISTORY: receives {missing} of {_describe(story)} have no events")
    return len(trails)


# -- putting it together ------------------------------------------------------------


def stored_by_id(db: store.Location) -> dict[str, list[store.Row]]:
    by_id: dict[str, list[store.Row]] = defaultdict(list)
    for row in store.rows(db):
        by_id[row.message_id].append(row)
    return by_id


def check_file(
    db: store.Location,
    journals: Path,
    *,
    queues: Iterable[str],
    drained: bool = False,
    dead_letters: Mapping[str, str] | None = None,
    where: str = "",
) -> Counter[str]:
    """Every invariant on the database at ``db`` (a SQLite file's path or a PostgreSQL URL) and
    the journals under ``journals``.

    Call it when no process is running.  ``queues`` are those the run used
    (counters are checked for them); with ``drained``, consumers ran last
    without kills until the queues were empty, so every message must have
    been delivered.  Raises AssertionError listing the violations; returns
    figures: messages checked, operations journaled, late (legitimate) errors,
    and calls a kill cut between intent and result ("cut batches", ...).
    """
    dead_letters = dead_letters or {}
    queues = list(queues)
    problems = Problems()
    verdict = store.integrity(db)
    if verdict != "ok":
        problems.add(f"INTEGRITY: {verdict}")
    history = History(read_journals(journals))
    stored = stored_by_id(db)
    check_nothing_lost(history, stored, problems)
    check_deleted_stay_deleted(history, stored, problems)
    check_one_holder(history, problems)
    check_fifo_groups_blocked(history, problems)
    check_no_phantoms(history, stored, dead_letters, problems)
    check_batches_whole(history, stored, problems)
    late = check_errors(history, problems)
    check_stats(db, stored, problems)
    check_counters(db, history, stored, queues, dead_letters, problems)
    with_history = check_message_history(db, history, stored, problems)
    if drained:
        check_all_delivered(history, stored, queues, problems)
        check_fifo_order(history, problems)
    problems.raise_if_any(where or str(db))
    figures = Counter(
        messages=len(history.stories),
        operations=history.operations,
        late_errors=late,
        history_checked=with_history,
    )
    figures.update({f"cut {kind}": n for kind, n in history.interrupted().items()})
    return figures
