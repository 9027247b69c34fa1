"""Hostile arguments for every public function, drawn by Hypothesis.

Only a ``durableq.DurableQError`` (or a ``TypeError`` for a wrong Python type,
such as an unknown keyword) may come out of a call, and afterwards the file
must pass ``PRAGMA integrity_check`` with the messages of a queue the fuzzer
never names still intact.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durableq
from durableq import Attribute, RedriveAllowPolicy, RedrivePolicy, SendEntry

from . import store

SENTINEL = "sentinel-keep"  # holds messages the fuzzer must never damage; no strategy names it
QUEUES = ("fuzz", "fuzz.fifo")

SPECIAL_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "a\udc80",
    "\ufeff",
    "\u202e",
    "\U0010ffff",
    "💥",
    "x'; DROP TABLE durableq_messages; --",
    "%",
    "_",
    "*",
    "\\",
    "../../etc/passwd",
    "\n",
    "\t",
    ".fifo",
    "fuzz",
    "fuzz.fifo",
    "other",
    "other.fifo",
    "A" * 81,
    "A" * 300,
]
lone_surrogates = st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=()), min_size=1, max_size=3
)
# Huge strings are built on demand (a literal in the list would make every repr huge).
huge = st.sampled_from([5_000, 262_145, 1_100_000]).map(lambda n: "x" * n)
short_text = st.one_of(st.sampled_from(SPECIAL_TEXT), st.text(max_size=40), lone_surrogates)
text = st.one_of(short_text, huge)
ints = st.one_of(
    st.integers(-5, 50),
    st.sampled_from([0, 1, 10, 900, 901, 43_200, 43_201, 2**31, 2**63 - 1, 2**63, -(2**63) - 1]),
    st.integers(-(2**70), 2**70),
)
anything = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.floats(),
    text,
    st.binary(max_size=20),
    st.lists(st.one_of(st.none(), ints, text), max_size=3),
    st.dictionaries(text, ints, max_size=2),
    st.just(object()),
)


# Hostile values for a path that name no file (a str would be a relative path: a file in the cwd).
not_a_path = st.one_of(st.none(), st.booleans(), ints, st.floats(), st.binary(max_size=20), st.just(object()))


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes anything at all."""
    return st.one_of(strategy, strategy, anything)


names = maybe(st.one_of(st.sampled_from(QUEUES), text))
handles = st.one_of(
    st.sampled_from(
        [
            "1.1.0123456789abcdef.0123456789abcdef",
            "9999999999999999999.9999999999999999999.0123456789abcdef.0123456789abcdef",
        ]
    ),
    st.from_regex(r"\d{1,19}\.\d{1,19}\.[0-9a-f]{16}\.[0-9a-f]{16}", fullmatch=True),
    text,
)


def built(value_type: Callable[..., Any]) -> Callable[..., Any]:
    """A constructor for ``st.builds`` that turns the value type's own refusal (a TypeError or a
    DurableQError, both allowed answers to wrong arguments) into a stand-in value, so that the
    call still happens with something hostile in its place."""

    def build(*args: Any, **kwargs: Any) -> Any:
        try:
            return value_type(*args, **kwargs)
        except (TypeError, durableq.DurableQError):
            return object()

    return build


attribute_values = st.one_of(
    text,
    ints,
    st.floats(),
    st.binary(max_size=10),
    st.builds(built(Attribute), text, st.one_of(text, st.binary(max_size=10))),
)
attributes = maybe(st.dictionaries(text, attribute_values, max_size=12))
policies = st.one_of(
    st.builds(built(RedrivePolicy), names, maybe(ints)),
    st.builds(
        built(RedriveAllowPolicy),
        maybe(st.sampled_from(["allowAll", "denyAll", "byQueue"])),
        maybe(st.lists(names, max_size=3)),
    ),
)
settings_keys = st.sampled_from(
    [
        "visibility_timeout",
        "delay_seconds",
        "retention_period",
        "receive_wait_time",
        "maximum_message_size",
        "content_based_deduplication",
        "deduplication_scope",
        "redrive_policy",
        "redrive_allow_policy",
        "policy",
        "kms_master_key_id",
        "kms_data_key_reuse_period",
        "sqs_managed_sse_enabled",
        "fifo_throughput_limit",
        "fifo",
        "bogus",
    ]
)
queue_settings = st.dictionaries(settings_keys, st.one_of(ints, policies, anything), max_size=4)


def send_entries(group: bool) -> st.SearchStrategy[Any]:
    entry = st.builds(
        built(SendEntry),
        maybe(st.sampled_from(["0", "1", "a_b", "x" * 80])),
        maybe(st.text(min_size=1, max_size=20)),
        delay_seconds=st.one_of(st.none(), ints),
        attributes=st.one_of(st.none(), attributes),
        group_id=st.one_of(st.none(), st.just("g") if group else st.none(), text),
        deduplication_id=st.one_of(st.none(), text),
    )
    return maybe(st.lists(entry, max_size=12))


@dataclass
class Target:
    """What the calls act on: one broker, the two fuzzed queues, and handles receives returned."""

    folder: Path
    broker: durableq.Broker
    handles: list[str] = field(default_factory=list)

    def queue(self, fifo: bool) -> durableq.Queue:
        name = QUEUES[fifo]
        try:
            return self.broker.get_queue(name)
        except durableq.QueueDoesNotExist:  # the fuzzer deleted it: make it again
            return self.broker.create_queue(name, fifo=fifo)


#: Schedule expressions, valid and not (broker.create_schedule).
EXPRESSIONS = [
    "rate(1 second)",
    "rate(5 minutes)",
    "cron(0 12 ? * MON-FRI *)",
    "cron(0 0 L 2 ? 2199)",
    "cron(0 0 31W * ? *)",
    "*/5 * * * *",
    "at(2199-12-31T23:59:59)",
    "at(1970-01-01T00:00:00)",
    "cron(0 12 * * * *)",
    "rate(0 minutes)",
]
schedule_names = maybe(st.one_of(st.sampled_from(["s", "t.u-v_w"]), text))
moments = st.one_of(st.none(), st.datetimes(), st.datetimes(timezones=st.timezones()), anything)

Call = tuple[str, Callable[[], Any]]
Arguments = tuple[tuple[Any, ...], dict[str, Any]]


def arguments(
    *positional: st.SearchStrategy[Any], **keywords: st.SearchStrategy[Any]
) -> st.SearchStrategy[Arguments]:
    """(args, kwargs): every positional argument drawn, each keyword given or left out."""
    return st.tuples(st.tuples(*positional), st.fixed_dictionaries({}, optional=keywords))


def keywords_only(strategy: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Arguments]:
    return st.tuples(st.just(()), strategy)


BROKER_CALLS: dict[str, st.SearchStrategy[Arguments]] = {
    "create_queue": st.tuples(
        st.tuples(names),
        st.builds(lambda fifo, extra: {"fifo": fifo, **extra}, maybe(st.booleans()), queue_settings),
    ),
    "get_queue": arguments(names),
    "list_queues": arguments(names),
    "delete_queue": arguments(names),
    "dead_letter_source_queues": arguments(names),
    "start_message_move": arguments(names, st.one_of(st.none(), names), st.one_of(st.none(), ints, anything)),
    "list_message_moves": arguments(names),
    "cancel_message_move": arguments(maybe(st.uuids().map(str))),
    "create_schedule": arguments(
        schedule_names,
        names,
        maybe(st.sampled_from(EXPRESSIONS)),
        text,
        attributes=st.one_of(st.none(), attributes),
        timezone=maybe(st.sampled_from(["UTC", "Europe/Paris", "Mars/Olympus"])),
        start=moments,
        end=moments,
        flexible_window=maybe(ints),
        catch_up=maybe(st.sampled_from(["latest", "all", "none"])),
        enabled=maybe(st.booleans()),
    ),
    "get_schedule": arguments(schedule_names),
    "list_schedules": arguments(schedule_names),
    "update_schedule": st.tuples(
        st.tuples(schedule_names),
        st.dictionaries(
            st.one_of(st.sampled_from(["body", "expression", "enabled", "queue", "end"]), text), anything
        ),
    ),
    "delete_schedule": arguments(schedule_names),
    "fire_due_schedules": arguments(),
}
OPEN = arguments(
    clock=st.one_of(st.none(), st.just(time.time), anything),
    durability=maybe(st.sampled_from(["full", "normal"])),
    busy_timeout=maybe(st.one_of(ints, st.floats())),
)


def queue_calls(fifo: bool, handle: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Arguments]]:
    """The Queue methods and their arguments; ``handle`` draws receipt handles, real ones among them."""
    return {
        "send": arguments(
            maybe(text),
            delay_seconds=maybe(ints),
            attributes=attributes,
            group_id=maybe(st.one_of(st.just("g"), text)),
            deduplication_id=maybe(text),
        ),
        "send_batch": arguments(send_entries(fifo)),
        # wait_time 0 always: a queue the fuzzer gave a receive wait time would make receives long polls.
        "receive": st.tuples(
            st.tuples(maybe(ints)),
            st.fixed_dictionaries(
                {"wait_time": st.just(0)},
                optional={"visibility_timeout": maybe(ints), "attempt_id": maybe(text)},
            ),
        ),
        "delete": arguments(handle),
        "delete_batch": arguments(maybe(st.lists(st.one_of(handle, st.tuples(text, handle)), max_size=12))),
        "change_visibility": arguments(handle, maybe(ints)),
        "change_visibility_batch": arguments(
            maybe(st.lists(st.one_of(st.tuples(handle, ints), st.tuples(text, handle, ints)), max_size=12))
        ),
        "set_attributes": keywords_only(queue_settings),
        "tag": keywords_only(st.dictionaries(text, maybe(text), max_size=4)),
        "untag": st.tuples(st.lists(maybe(text), max_size=4).map(tuple), st.just({})),
        "peek": arguments(
            state=maybe(st.sampled_from(["visible", "in_flight", "delayed"])), limit=maybe(ints)
        ),
        "add_permission": arguments(
            maybe(text),
            maybe(st.lists(st.one_of(st.just("123456789012"), text), max_size=3)),
            maybe(st.lists(st.one_of(st.just("SendMessage"), text), max_size=3)),
            resource=maybe(text),
        ),
        "remove_permission": arguments(maybe(text)),
        "purge": arguments(),
    }


QUEUE_CALLS = sorted(queue_calls(False, handles))


def calls(target: Target, data: st.DataObject) -> Call:
    """One public function with drawn arguments, ready to call, and how to describe it."""
    kind = data.draw(st.sampled_from(["open", *BROKER_CALLS, *QUEUE_CALLS]))
    if kind == "open":
        component = data.draw(short_text.filter(lambda t: "/" not in t))
        inside = target.folder / "opened" / component
        path = data.draw(st.one_of(st.just(inside), st.just(str(inside)), not_a_path))
        _, options = data.draw(OPEN)
        return f"durableq.open({path!r}, **{options!r})", lambda: durableq.open(path, **options).close()
    if kind in BROKER_CALLS:
        args, kwargs = data.draw(BROKER_CALLS[kind])
        method = getattr(target.broker, kind)
        return f"broker.{kind}(*{args!r}, **{kwargs!r})", lambda: method(*args, **kwargs)
    queue = target.queue(data.draw(st.booleans()))
    known = st.sampled_from(target.handles) if target.handles else handles
    args, kwargs = data.draw(queue_calls(queue.fifo, st.one_of(known, handles, anything))[kind])

    def call() -> Any:
        result = getattr(queue, kind)(*args, **kwargs)
        if kind == "receive":  # keep some real handles for later deletes and visibility changes
            target.handles[:] = (target.handles + [m.receipt_handle for m in result])[-20:]
        return result

    return f"{queue.name}.{kind}(*{args!r}, **{kwargs!r})", call


def check_call(description: str, call: Callable[[], Any], offenders: Counter[str] | None = None) -> None:
    """Call; anything but a DurableQError or TypeError fails, or is counted in ``offenders`` if given."""
    try:
        call()
    except (durableq.DurableQError, TypeError):
        pass
    except Exception as exc:
        if offenders is not None:
            offenders[f"{description.split('(')[0]} raised {type(exc).__name__}"] += 1
            return
        raise AssertionError(f"{description[:500]} raised {type(exc).__name__}: {str(exc)[:500]}") from exc


def prepare(folder: Path, db: str | None = None) -> tuple[durableq.Broker, dict[str, str]]:
    """A broker with the fuzzed queues and a sentinel queue of messages; the sentinel's rows.
    ``db``: the database (default: the file ``fuzz.db`` in ``folder``; or a PostgreSQL URL)."""
    (folder / "opened").mkdir(parents=True, exist_ok=True)
    db = db or str(folder / "fuzz.db")
    broker = durableq.open(db, durability="normal")
    sentinel = broker.create_queue(SENTINEL, redrive_allow_policy=RedriveAllowPolicy("denyAll"))
    sentinel.send_batch([SendEntry(str(i), f"keep {i} \U0001f512") for i in range(10)])
    for name in QUEUES:
        broker.create_queue(name, fifo=name.endswith(".fifo"))
    return broker, _sentinel_rows(db)


def _sentinel_rows(db: str) -> dict[str, str]:
    return {row.message_id: row.body for row in store.rows(db) if row.queue == SENTINEL}


def fuzz(
    folder: Path, max_examples: int, offenders: Counter[str] | None = None, db: str | None = None
) -> int:
    """Run ``max_examples`` Hypothesis examples of 1-5 hostile calls; returns how many calls ran.

    With ``offenders`` (the long mode), a call that raises something else is
    counted there instead of failing, so that known bugs do not stop the search;
    damage to the file always fails.
    """
    db = db or str(folder / "fuzz.db")
    broker, sentinel = prepare(folder, db)
    count = [0]

    # The long mode explores afresh each time rather than replaying the failures saved by the tests.
    fresh: dict[str, Any] = {"database": None} if offenders is not None else {}

    @settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck), **fresh)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        target = Target(folder, broker)
        for _ in range(data.draw(st.integers(1, 5))):
            description, call = calls(target, data)
            check_call(description, call, offenders)
            count[0] += 1
        verdict = store.integrity(db)
        assert verdict == "ok", f"integrity_check: {verdict}"
        assert _sentinel_rows(db) == sentinel, "the messages of a queue no call named changed"

    try:
        # In the folder: should any call create a file by a relative name, it lands there.
        with contextlib.chdir(folder), warnings.catch_warnings():
            # The strategies are deeply nested; Hypothesis warns that their repr is long.
            warnings.filterwarnings("ignore", message="Generating overly large repr")
            run()
    finally:
        broker.close()
    return count[0]
