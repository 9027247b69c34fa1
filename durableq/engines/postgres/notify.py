"""How a PostgreSQL database's change watcher learns of commits: a transaction that changed rows sends
``NOTIFY`` with its commit when a listener is registered (see :mod:`.database`, and :mod:`.locks` for
the registration), so a waiter on any host learns of it when the commit does; a probe of the next
transaction id confirms, and stands in when the listener broke."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg

from ..change_sources import News
from .connection import close_quietly

log = logging.getLogger(__name__)


def channel(schema: str) -> str:
    """The channel of the change notifications of the durableq of ``schema`` (channels belong to the
    whole database: one per schema, so a commit in one installation wakes no waiter of another).
    ``schema`` is a checked name (``validation.schema_name``): an identifier as it is."""
    return f"durableq_{schema}"


#: A new driver connection with the database's settings.
Connect = Callable[[], psycopg.Connection[Any]]


class ListenSource:
    """The watcher's change source: a connection that ``LISTEN``s; readable at every ``NOTIFY``."""

    interval = 1.0

    def __init__(self, connect: Connect, channel: str, register: str) -> None:
        """``register``: the statement that tells writers someone listens (see :mod:`.locks`: writers
        notify only then), run once the ``LISTEN`` is in effect, before any waiter looks."""
        self._raw = connect()
        try:
            self._raw.execute(f"LISTEN {channel}")
            self._raw.execute(register)
        except BaseException:
            close_quietly(self._raw, "the listener")  # it may hold a lock half way: its session ends
            raise
        self.fileno: int | None = self._raw.fileno()

    def read(self) -> News:
        if self.fileno is None:
            return News.NOTHING  # broken earlier: the watcher's periodic probe stands in
        pgconn = self._raw.pgconn
        try:
            pgconn.consume_input()
        except psycopg.Error:
            # The server went away: stop listening (waiters fall back on the watcher's periodic
            # probe and on their deadlines) rather than read a dead socket in a loop.
            log.warning("the change notification connection broke; long polls fall back on polling")
            self.fileno = None
            return News.MAYBE
        news = News.NOTHING
        while pgconn.notifies() is not None:
            news = News.COMMITTED
        return news

    def close(self) -> None:
        close_quietly(self._raw, "the listener")


class TransactionIdProbe:
    """The watcher's probe: the next transaction id, which moves whenever anything is written."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._raw = connect()

    def __call__(self) -> int:
        if self._raw.closed or self._raw.broken:
            self._raw = self._connect()
        row = self._raw.execute("SELECT CAST(pg_snapshot_xmax(pg_current_snapshot()) AS text)").fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        close_quietly(self._raw, "the probe")
