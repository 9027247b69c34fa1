"""Expected values computed in plain Python from the SQLite file, independently of the Spark code."""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import durableq


def connect_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


@dataclass(frozen=True)
class Row:
    """A message row of the file, with its queue's name and retention."""

    row_id: int
    queue: str
    retention_period: int
    message_id: str
    body: str
    enqueued_at: int
    visible_at: int
    first_received_at: int | None
    receive_count: int
    group_id: str | None
    deduplication_id: str | None
    sequence: int | None
    dead_letter_source: str | None
    payload_size: int | None
    data_key_id: int | None

    def expired(self, now_ms: int) -> bool:
        return self.enqueued_at + self.retention_period * 1000 <= now_ms

    def state(self, now_ms: int) -> str:
        if self.visible_at <= now_ms:
            return "visible"
        return "in_flight" if self.receive_count > 0 else "delayed"


def message_rows(path: Path) -> list[Row]:
    with connect_ro(path) as conn:
        return [
            Row(*r)
            for r in conn.execute(
                "SELECT m.id, q.name, q.retention_period, m.message_id, m.body, m.enqueued_at, m.visible_at, "
                "m.first_received_at, m.receive_count, m.group_id, m.deduplication_id, m.sequence, "
                "m.dead_letter_source, m.payload_size, m.data_key_id "
                "FROM durableq_messages m JOIN durableq_queues q ON q.id = m.queue_id"
            )
        ]


def live(rows: Iterable[Row], now_ms: int) -> list[Row]:
    return [r for r in rows if not r.expired(now_ms)]


def rank_window(values: Sequence[float], fraction: float, accuracy: int) -> tuple[float, float]:
    """The values an approximate percentile may take: ranks within n/accuracy of the exact rank."""
    ordered = sorted(values)
    n = len(ordered)
    slack = n / accuracy + 1
    low = max(0, math.floor(fraction * n - slack))
    high = min(n - 1, math.ceil(fraction * n + slack))
    return ordered[low], ordered[high]


def unswept_by_minute(rows: Iterable[Row], now_ms: int) -> dict[str, dict[datetime, int]]:
    """Expired rows still in the file, per queue and the minute they expired in."""
    found: dict[str, dict[datetime, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        if row.expired(now_ms):
            expired_at = row.enqueued_at + row.retention_period * 1000
            found[row.queue][durableq.types.datetime_from_ms(expired_at - expired_at % 60_000)] += 1
    return found


def depth_estimate(
    metrics: Mapping[str, Sequence[durableq.MinuteMetrics]],
    depth_now: Mapping[str, int],
    unswept: Mapping[str, Mapping[datetime, int]],
) -> dict[str, list[tuple[datetime, int, int]]]:
    """Per queue, (minute, net change, depth at the end of the minute), walking back from ``depth_now``."""
    net: dict[str, dict[datetime, int]] = defaultdict(lambda: defaultdict(int))
    for queue, expired in unswept.items():
        for minute, count in expired.items():
            net[queue][minute] -= count
    for queue, minutes in metrics.items():
        for m in minutes:
            net[queue][m.minute] += (
                m.sent + m.moved_in - m.deleted - m.moved_to_dead_letter - m.moved_out - m.expired - m.purged
            )
    result: dict[str, list[tuple[datetime, int, int]]] = {}
    for queue, changes in net.items():
        depth = depth_now.get(queue, 0)
        walked = []
        for minute in sorted(changes, reverse=True):
            walked.append((minute, changes[minute], depth))
            depth -= changes[minute]
        result[queue] = walked[::-1]
    return result
