"""The bodies of the processes a run starts, killed at random by the harness.

``python -m tests.reliability.launch CONFIG_JSON`` runs one role.  The config
names the role, the database, this process's journal, a random seed and,
optionally, ``until`` (wall time at which to stop cleanly).  Every role opens
the file with ``durability="full"`` and journals through
:class:`~tests.reliability.journaled.JournaledQueue`.  A role that stops
cleanly closes its broker (writing its counters) before journaling ``stop``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
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


def open_broker(config: Config) -> durableq.Broker:
    return durableq.open(config["db"], durability=config.get("durability", "full"))


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
    tag = Path(config["journal"]).stem
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
    """A producer and one consumer per queue, as threads of one process."""
    threads = [threading.Thread(target=producer, args=(config, journal))]
    for index, spec in enumerate(config["queues"]):
        consumer_config = {**config, "queue": spec["name"], "seed": config["seed"] * 100 + index}
        threads.append(threading.Thread(target=consumer, args=(consumer_config, journal)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
