"""A snapshot of a PostgreSQL database for Spark: the live tables, as one transaction sees them.

Nothing is copied.  A ``REPEATABLE READ`` transaction of this process, begun as a settled read
(see ``durableq.engines.postgres.Database.settled_read``), exports its snapshot
(``pg_export_snapshot()``) and stays open while Spark reads; every JDBC connection Spark opens
begins its own transaction with ``SET TRANSACTION SNAPSHOT`` of that id (the connection's
``sessionInitStatement``), so every partition, on any executor, reads exactly the state the
exporting transaction saw, whatever producers and consumers commit meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg

from ..engines.dialect import POSTGRES
from ..engines.fileformat import SCHEMA_REVISION
from ..engines.postgres.connection import close_quietly, placeholders
from ..engines.postgres.database import VERSION_TABLE
from ..engines.postgres.errors import translate
from ..engines.postgres.locks import SETTLED_BARRIER, SETTLED_BEGIN
from ..engines.urls import redacted
from ..errors import DatabaseError, NotADurableQDatabase
from .driver import POSTGRES as POSTGRES_DRIVER
from .errors import AnalyticsError
from .snapshot import Snapshot

log = logging.getLogger(__name__)

#: Seconds a connection may take to open (the snapshot's, and each of Spark's).
_CONNECT_TIMEOUT = 10


class PostgresSnapshot(Snapshot):
    """The state a ``REPEATABLE READ`` transaction exported (``snapshot_id``), held open until
    :meth:`close`."""

    driver_class = POSTGRES_DRIVER.driver_class
    dialect = POSTGRES

    def __init__(self, url: str, conn: psycopg.Connection[Any], snapshot_id: str, now_ms: int) -> None:
        super().__init__(redacted(url), now_ms)
        self._url = url
        self._conn = conn
        self.snapshot_id = snapshot_id
        self.location = f"{self.source} (snapshot {snapshot_id})"

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def close(self) -> None:
        """End the exporting transaction (the snapshot is gone with it)."""
        close_quietly(self._conn, "the snapshot's connection")

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        if self.closed:
            raise AnalyticsError("this snapshot is closed; take a new one to read again")
        try:
            return [
                tuple(row) for row in self._conn.execute(placeholders(sql), parameters or None).fetchall()
            ]
        except psycopg.Error as exc:
            raise translate(exc, self._url, _CONNECT_TIMEOUT) from exc

    def jdbc(self, sql: str) -> tuple[str, str, dict[str, str]]:
        parts = urlsplit(self._url)
        port = f":{parts.port}" if parts.port else ""
        url = f"jdbc:postgresql://{parts.hostname or 'localhost'}{port}{parts.path or '/'}"
        # The libpq URL's parameters (sslmode, ...) are pgjdbc's connection properties too.
        properties = {key: value for key, value in parse_qsl(parts.query)}
        if parts.username:
            properties["user"] = parts.username
        if parts.password:
            properties["password"] = parts.password
        properties.update(
            driver=POSTGRES_DRIVER.driver_class,
            connectTimeout=str(_CONNECT_TIMEOUT),
            sessionInitStatement=(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                f"SET TRANSACTION SNAPSHOT '{self.snapshot_id}'"
            ),
        )
        return url, sql, properties


def export(url: str, clock: Callable[[], float]) -> PostgresSnapshot:
    """Begin the transaction whose snapshot Spark reads (settled: it waits for the writes under way),
    and check the database is durableq's."""
    try:
        conn = psycopg.connect(
            url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT, application_name="durableq"
        )
    except psycopg.Error as exc:
        raise translate(exc, url, _CONNECT_TIMEOUT) from exc
    try:
        # A settled snapshot (as the library's readers take): every event id at or below the highest
        # it holds has committed or never will, so an incremental export resumes after it safely.
        conn.execute(f"SET lock_timeout = {_CONNECT_TIMEOUT * 1000}")
        conn.execute(SETTLED_BARRIER)
        conn.execute(SETTLED_BEGIN)
        row = conn.execute("SELECT pg_export_snapshot(), to_regclass(%s)", (VERSION_TABLE,)).fetchone()
        assert row is not None
        snapshot_id, has_version = row
        # The clock is read after the export: every message in the snapshot was written before "now".
        now_ms = int(clock() * 1000)
        if has_version is None:
            raise NotADurableQDatabase(f"{redacted(url)} holds no durableq tables")
        version = conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone()
        revision = None if version is None else version[0]
        if revision != SCHEMA_REVISION:
            raise DatabaseError(
                f"{redacted(url)} is at schema revision {revision!r}; this durableq reads "
                f"{SCHEMA_REVISION!r}. Open it once with durableq (or `durableq db upgrade`) to migrate it"
            )
    except psycopg.Error as exc:
        conn.close()
        raise translate(exc, url, _CONNECT_TIMEOUT) from exc
    except BaseException:
        conn.close()
        raise
    log.debug("snapshot %s of %s at %s", snapshot_id, redacted(url), now_ms)
    return PostgresSnapshot(url, conn, str(snapshot_id), now_ms)
