"""Judging a hostile run: the checker's promises on the checked queues, and the mix's own.

- The checker's (:mod:`tests.reliability.checker`), on the checked queues only
  (the scratch queues are not journaled): nothing acknowledged lost, nothing
  back after a delete, no two holders, FIFO order and groups held, no
  phantom or duplicate, batches whole, only legitimate errors, stats and
  counters, message history equal to what committed; after the drain, every
  message delivered.  The opaque queues' rows hold ciphertext or a payload
  reference: there a row is matched to its send by message id (a row whose id
  no journal logged is a send cut by a kill, and is not judged).
- Every ``call`` line: no ``bad`` one.
- No planted file that is not a payload went (the payload sweep's reach).
- Events: a reader that resumed after the last id it saw (``message_events(after=last)``)
  for the whole run saw every event the database holds exactly once.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, defaultdict
from pathlib import Path

import durableq

from .. import checker, store
from ..checker import Problems
from ..history import History
from ..journal import Entry, read_journals
from . import layout

_SHOWN_PER_KIND = 5


class EventTail:
    """A reader of ``message_events(after=last)`` for the whole run, in a thread of the harness."""

    def __init__(self, place: layout.Place) -> None:
        self.place = place
        self.seen: Counter[int] = Counter()
        self.last = 0
        self.reads = 0
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-tail", daemon=True)

    def __enter__(self) -> EventTail:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        with durableq.open(self.place.db, **self.place.options) as broker:
            while not self._stop.is_set():
                if not self._read(broker):
                    self._stop.wait(0.05)

    def _read(self, broker: durableq.Broker) -> bool:
        try:
            events = broker.message_events(after=self.last, limit=1000)
        except durableq.DurableQError as exc:
            self.problems.append(f"EVENTS: message_events(after={self.last}) raised {exc.code}: {exc}")
            self._stop.wait(0.5)
            return False
        self.reads += 1
        for event in events:
            if event.event_id <= self.last:
                self.problems.append(
                    f"EVENTS: message_events(after={self.last}) returned event {event.event_id}"
                )
            self.seen[event.event_id] += 1
            self.last = max(self.last, event.event_id)
        return len(events) == 1000

    def finish(self) -> None:
        """Read what is left (the run is over: no process writes now)."""
        with durableq.open(self.place.db, **self.place.options) as broker:
            while self._read(broker):
                pass

    def check(self, problems: Problems) -> int:
        """Every event in the database was seen once; returns how many were checked."""
        for text in self.problems:
            problems.add(text)
        with store.reading(self.place.db) as conn:
            ids = [
                int(i)
                for (i,) in conn.execute("SELECT event_id FROM durableq_message_events ORDER BY event_id")
            ]
        missed = [i for i in ids if i <= self.last and i not in self.seen]
        twice = sorted(i for i, n in self.seen.items() if n > 1)
        if missed:
            problems.add(
                f"EVENTS MISSED: {len(missed)} of {len(ids)} events were never returned to a reader that "
                f"resumed after the last id it saw (e.g. ids {missed[:10]}): they committed after a "
                "higher id had been read"
            )
        if twice:
            problems.add(f"EVENTS TWICE: {len(twice)} events were returned twice (e.g. ids {twice[:10]})")
        return len(ids)


def _stored(
    place: layout.Place, history: History
) -> tuple[dict[str, list[store.Row]], dict[str, list[store.Row]], int]:
    """Rows of the checked queues (opaque bodies replaced by the sent body, where a journal knows
    it), the same less the opaque rows no journal knows, and how many those were."""
    every = checker.stored_by_id(place.db)
    checked: dict[str, list[store.Row]] = defaultdict(list)
    known: dict[str, list[store.Row]] = defaultdict(list)
    unknown = 0
    for message_id, rows in every.items():
        for row in rows:
            if row.queue not in layout.CHECKED:
                continue
            if row.queue in layout.OPAQUE:
                story = history.stories.get(message_id)
                if story is None:
                    checked[message_id].append(row)
                    unknown += 1
                    continue
                row = store.Row(
                    row.queue,
                    row.message_id,
                    story.body,
                    row.receive_count,
                    row.group,
                    row.sequence,
                    row.dead_letter_source,
                )
            checked[message_id].append(row)
            known[message_id].append(row)
    return checked, known, unknown


#: What varies between two reports of one kind of failure: quoted names, ids, locations, numbers.
_VARYING = re.compile(
    r"'[^']*'|\"[^\"]*\"|postgresql://\S+|/\S+|[0-9a-f]{8}-[0-9a-f-]{27}|[\w.-]+\.jsonl:\d+|\d+(\.\d+)?"
)


def blank(text: str) -> str:
    """``text`` with its particulars blanked: the reports of one kind of failure share it."""
    return _VARYING.sub("_", text.splitlines()[0] if text else "")[:150]


def _calls(entries: list[Entry], problems: Problems) -> Counter[str]:
    """Figures of the ``call`` lines; one problem per kind of ``bad`` outcome (its error and text),
    with how many calls met it, which ones, and the first."""
    figures: Counter[str] = Counter()
    bad: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    for entry in entries:
        if entry.kind != "call":
            continue
        figures[f"call {entry['op']}"] += 1
        figures[f"outcome {entry['o']}"] += 1
        if entry["o"] == "bad":
            bad[(entry["err"], blank(entry.get("msg", "")))].append(entry)
    for (error, _), found in sorted(bad.items(), key=lambda item: -len(item[1])):
        first = found[0]
        ops = Counter(entry["op"] for entry in found)
        tail = first.get("tb", "").strip().splitlines()
        where = f" (last frame: {tail[-3].strip()})" if len(tail) >= 3 else ""
        calls = ", ".join(f"{op} {n}" for op, n in ops.most_common(6))
        problems.add(
            f"UNEXPECTED {error}: {first.get('msg', '')} -- {len(found)} calls ({calls}); "
            f"first at {first.source}:{first.line}{where}"
        )
    return figures


def judge(
    place: layout.Place, journals: Path, *, drained: bool, tail: EventTail | None
) -> tuple[Counter[str], Problems]:
    """Every check of a run whose processes all ended; returns its figures and what broke."""
    problems = Problems()
    verdict = store.integrity(place.db)
    if verdict != "ok":
        problems.add(f"INTEGRITY: {verdict}")
    entries = read_journals(journals)
    history = History(entries)
    checked, known, unknown = _stored(place, history)
    checker.check_nothing_lost(history, checked, problems)
    checker.check_deleted_stay_deleted(history, checked, problems)
    checker.check_one_holder(history, problems)
    checker.check_fifo_groups_blocked(history, problems)
    checker.check_no_phantoms(history, known, {}, problems)
    checker.check_batches_whole(history, known, problems)
    late = checker.check_errors(history, problems)
    checker.check_stats(place.db, checker.stored_by_id(place.db), problems)
    checker.check_counters(place.db, history, checked, layout.CHECKED, {}, problems)
    histories = checker.check_message_history(place.db, history, checked, problems)
    if drained:
        checker.check_all_delivered(history, checked, layout.CHECKED, problems)
        checker.check_fifo_order(history, problems)
    figures = _calls(entries, problems)
    for path in layout.canaries_missing(place):
        problems.add(f"NOT A PAYLOAD, REMOVED: {path} (payload store: {place.how}, {place.payload_dir})")
    events = tail.check(problems) if tail is not None else 0
    figures.update(
        messages=len(history.stories),
        operations=history.operations,
        late_errors=late,
        history_checked=histories,
        events_checked=events,
        opaque_rows_unjudged=unknown,
        **{f"cut {kind}": n for kind, n in history.interrupted().items()},
    )
    return figures, problems


def summary(figures: Counter[str]) -> dict[str, object]:
    """The figures a run prints: calls by kind, outcomes, kills, forks, threads, checks."""
    calls = {key[5:]: n for key, n in sorted(figures.items()) if key.startswith("call ")}
    return {
        "calls": sum(calls.values()) + figures["operations"],
        "calls by kind": calls,
        "journaled operations on checked queues": figures["operations"],
        "expected failures": figures["outcome exp"] + figures["late_errors"],
        "unexpected failures": figures["outcome bad"],
        "kills": figures["kills"],
        "forks": figures["call fork"],
        "short-lived threads": figures["call thread"],
        "processes started": figures["processes"],
        "messages checked": figures["messages"],
        "message histories checked": figures["history_checked"],
        "events checked": figures["events_checked"],
    }
