"""Queues holding a large backlog (10k, 100k, 1M messages), built once per run and shared by W5 and W7.

Each size is built by copying the next smaller file and sending the
difference with ``send_batch`` (10 messages per transaction, the API a user
would use), so a full run sends a million messages once, not 1.11 million.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import durableq

from .model import Config
from .systems import QUEUE, DurableQ

log = logging.getLogger(__name__)

DURABILITY = "normal"
BODY = "b" * 100


def sizes(cfg: Config) -> tuple[int, ...]:
    return cfg.pick((10_000, 100_000, 1_000_000), (500, 2_000, 5_000))


def label(size: int) -> str:
    return (
        f"{size // 1_000_000}M" if size >= 1_000_000 else f"{size // 1_000}k" if size >= 1_000 else str(size)
    )


def _path(cfg: Config, size: int) -> Path:
    return cfg.workdir / f"backlog-{size}.db"


def fill(queue: durableq.Queue, count: int) -> None:
    """Send ``count`` messages in batches of 10."""
    full, rest = divmod(count, 10)
    entries = [durableq.SendEntry(str(i), BODY) for i in range(10)]
    for _ in range(full):
        queue.send_batch(entries)
    if rest:
        queue.send_batch(entries[:rest])


def backlog(cfg: Config, size: int) -> Path:
    """A closed durableq file whose queue holds ``size`` visible messages.

    Workloads that take messages out must put as many back (:func:`fill`), so
    the next user finds the size it asked for.
    """
    path = _path(cfg, size)
    if path.exists():
        return path
    smaller = [s for s in sizes(cfg) if s < size and _path(cfg, s).exists()]
    have = max(smaller, default=0)
    if have:
        # A closed broker leaves no WAL (the last connection checkpoints it), but copy one if present.
        for suffix in ("", "-wal"):
            source = Path(f"{_path(cfg, have)}{suffix}")
            if source.exists():
                shutil.copyfile(source, f"{path}{suffix}")
    start = time.perf_counter()
    log.info("building a backlog of %s messages (from %s)", f"{size:,}", f"{have:,}")
    adapter = DurableQ(path, DURABILITY, QUEUE)
    try:
        fill(adapter.queue, size - have)
    finally:
        adapter.close()
    log.info("backlog of %s built in %.1f s", f"{size:,}", time.perf_counter() - start)
    return path
