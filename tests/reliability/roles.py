"""The bodies of the processes a run starts, killed at random by the harness.

``python -m tests.reliability.launch CONFIG_JSON`` runs one role.  The config
names the role, the database, this process's journal, a random seed and,
optionally, ``until`` (wall time at which to stop cleanly).  Every role opens
the file with ``durability="full"`` and journals through
:class:`~tests.reliability.journaled.JournaledQueue`.  A role that stops
cleanly closes its broker (writing its counters) before journaling ``stop``.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import durableq
from durableq import SendEntry

from . import handlers
from .journal import Journal, read_journal
from .journaled import JournaledQueue

Config = dict[str, Any]
ROLES: dict[str, Callable[[Config, Journal], None]] = {}


def role(function: Callable[[Config, Journal], None]) -> Callable[[Config, Journal], None]:
    ROLES[function.__name__] = function
    return function


def _running(config: Config) -> bool:
    return "until" not in config or time.time() < config["until"]


def open_broker(config: Config) -> AbstractContextManager[durableq.Broker]:
    """The broker of this role: its own, or the one its process shares between threads (``broker``)."""
    shared = config.get("broker")
    if shared is not None:
        return contextlib.nullcontext(shared)
    return durableq.open(config["db"], durability=config.get("durability", "full"))


def _threads(
    config: Config, journal: Journal, roles: list[tuple[Callable[[Config, Journal], None], Config]]
) -> None:
    """Run roles as threads of this process; with ``shared`` they all use one broker, so their
    writes meet in its group commit (with a broker each, they never do)."""
    with contextlib.ExitStack() as stack:
        if config.get("shared"):
            broker = stack.enter_context(
                durableq.open(config["db"], durability=config.get("durability", "full"))
            )
            roles = [(function, {**role_config, "broker": broker}) for function, role_config in roles]
        threads = [
            threading.Thread(target=function, args=(role_config, journal)) for function, role_config in roles
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _producers(config: Config) -> list[tuple[Callable[[Config, Journal], None], Config]]:
    """``producers`` producer roles (default 1), each with bodies and a seed of its own;
    only the first sends again what a killed predecessor left unfinished."""
    count = config.get("producers", 1)
    if count == 1:
        return [(producer, config)]
    return [
        (
            producer,
            {
                **config,
                "tag": f"p{i}",
                "seed": config["seed"] * 1000 + i,
                "retry": config.get("retry", []) if i == 0 else [],
            },
        )
        for i in range(count)
    ]


def journaled_queue(broker: durableq.Broker, journal: Journal, name: str, config: Config) -> JournaledQueue:
    return JournaledQueue(broker.get_queue(name), journal, config.get("vt", 2))


# -- producers -----------------------------------------------------------------


def _unfinished_sends(journals: list[str]) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Sends (queue, [(body, group)]) a killed predecessor began and never saw return."""
    begun: dict[str, tuple[str, list[tuple[str, str | None]]]] = {}
    done: set[str] = set()
    for path in filter(lambda p: Path(p).exists(), journals):  # a run killed at once wrote none
        for entry in read_journal(Path(path)):
            if entry.kind == "send-intent":
                begun[entry["body"]] = (entry["q"], [(entry["body"], entry["g"])])
            elif entry.kind == "batch-intent":
                begun[entry["bodies"][0]] = (entry["q"], list(zip(entry["bodies"], entry["g"])))
            elif entry.kind == "sent":
                done.add(entry["body"])
            elif entry.kind == "batch-sent":
                done.update(body for body, _, _ in entry["ok"])
    return [send for first, send in begun.items() if first not in done]


def _send(queue: JournaledQueue, items: list[tuple[str, str | None]], delay: int | None) -> None:
    if len(items) == 1:
        body, group = items[0]
        queue.send(body, group_id=group, delay_seconds=delay)
    else:
        queue.send_batch(
            [
                SendEntry(str(i), body, group_id=group, delay_seconds=delay)
                for i, (body, group) in enumerate(items)
            ]
        )


@role
def producer(config: Config, journal: Journal) -> None:
    """Sends (70 %) and batches of 10 (30 %) to its queues, with unique bodies.

    On a FIFO queue with content-based deduplication a restarted producer
    first sends again what its killed predecessors left unfinished: the
    queue must then hold each of those messages exactly once.
    """
    rng = random.Random(config["seed"])
    tag = Path(config["journal"]).stem + config.get("tag", "")
    low, high = config.get("pause", (0.0, 0.02))
    with open_broker(config) as broker:
        queues = {
            q["name"]: (journaled_queue(broker, journal, q["name"], config), q.get("groups"))
            for q in config["queues"]
        }
        for name, items in _unfinished_sends(config.get("retry", [])):
            if queues[name][1]:
                _send(queues[name][0], items, None)
        sent = 0
        while _running(config) and sent < config.get("count", 10**12):
            queue, groups = queues[rng.choice(sorted(queues))]
            size = 10 if rng.random() < config.get("batch_share", 0.3) else 1
            items = [(f"{tag}.{sent + i}", rng.choice(groups) if groups else None) for i in range(size)]
            delay = None if groups or rng.random() > config.get("delay_share", 0.0) else 1
            _send(queue, items, delay)
            sent += size
            time.sleep(rng.uniform(low, high))


# -- consumers -----------------------------------------------------------------


def _empty(queue: JournaledQueue) -> bool:
    stats = queue.stats()
    return (
        stats.approximate_number_of_messages
        + stats.approximate_number_of_messages_not_visible
        + stats.approximate_number_of_messages_delayed
    ) == 0


@role
def consumer(config: Config, journal: Journal) -> None:
    """Receives 1-10 messages at a time; deletes most (one by one or in a batch), releases
    a few (change visibility 0) and abandons the rest to their visibility timeout.
    With ``drain`` it deletes everything (unless told otherwise) and stops once its queue is empty."""
    rng = random.Random(config["seed"])
    drain = config.get("drain", False)
    delete_share = config.get("delete_share", 1.0 if drain else 0.8)
    release_share = config.get("release_share", 0.0 if drain else 0.05)
    with open_broker(config) as broker:
        queue = journaled_queue(broker, journal, config["queue"], config)
        while _running(config):
            try:
                messages = queue.receive(rng.randint(1, 10), wait_time=config.get("wait", 1))
                if not messages and drain and _empty(queue):
                    break
                batch = []
                for message in messages:
                    roll = rng.random()
                    if roll < delete_share and rng.random() < config.get("batch_share", 0.4):
                        batch.append(message.receipt_handle)
                    elif roll < delete_share:
                        queue.delete(message.receipt_handle)
                    elif roll < delete_share + release_share:
                        queue.change_visibility(message.receipt_handle, 0)
                if batch:
                    queue.delete_batch(batch)
            except durableq.DurableQError:
                pass  # journaled by JournaledQueue; the checker decides whether it was legitimate


@role
def worker(config: Config, journal: Journal) -> None:
    """``durableq.Worker`` over a journaled queue, with the handler of ``handlers``."""
    handlers.configure(config["seed"], **config.get("handler", {}))
    with open_broker(config) as broker:
        queue = journaled_queue(broker, journal, config["queue"], config)
        runner = durableq.Worker(
            queue,  # type: ignore[arg-type]  # duck-typed: journals every call the worker makes
            handlers.handle,
            concurrency=config.get("concurrency", 2),
            visibility_timeout=config.get("vt", 2),
            wait_time=1,
            backoff=handlers.backoff,
            grace_period=1,
        )
        if "until" in config:
            threading.Timer(max(config["until"] - time.time(), 0), runner.stop).start()
        runner.run()


@role
def mixed(config: Config, journal: Journal) -> None:
    """``producers`` producers (default 1) and one consumer per queue, as threads of one process
    (each with a broker of its own, or with ``shared`` one broker for all)."""
    roles = _producers(config)
    for index, spec in enumerate(config["queues"]):
        roles.append((consumer, {**config, "queue": spec["name"], "seed": config["seed"] * 100 + index}))
    _threads(config, journal, roles)


@role
def producers(config: Config, journal: Journal) -> None:
    """``producers`` producers as threads of one process (``shared``: on one broker)."""
    _threads(config, journal, _producers(config))
