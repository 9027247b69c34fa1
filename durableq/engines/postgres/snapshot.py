"""A snapshot of a PostgreSQL database for readers outside durableq: the live tables, as one
transaction sees them.

Nothing is copied.  A ``REPEATABLE READ`` transaction of this process, begun as a settled read begins
(:class:`.locks.Begins`: it waits for the writes under way),
exports its snapshot (``pg_export_snapshot()``) and stays open while the readers read; every JDBC
connection a reader opens begins its own transaction with ``SET TRANSACTION SNAPSHOT`` of that id (the
connection's ``sessionInitStatement``), so every partition, on any executor, reads exactly the state
the exporting transaction saw, whatever producers and consumers commit meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import psycopg

from ...errors import NotADurableQDatabase
from ..dialect import POSTGRES
from ..fileformat import VERSION_TABLE, check_readable
from ..urls import redacted
from .connection import close_quietly, connect_raw, placeholders
from .errors import translate
from .locks import begins

log = logging.getLogger(__name__)


class ExportedTransaction:
    """The state a ``REPEATABLE READ`` transaction exported (``snapshot_id``), held open until
    :meth:`close` (see :meth:`..base.Database.export_snapshot`)."""

    dialect = POSTGRES
    #: Nothing is copied: readers connect to the server.
    file: Path | None = None

    def __init__(
        self,
        url: str,
        conn: psycopg.Connection[Any],
        snapshot_id: str,
        now_ms: int,
        busy_timeout: float,
        schema: str,
    ) -> None:
        self.source = redacted(url)
        self.snapshot_id = snapshot_id
        self.location = f"{self.source} (snapshot {snapshot_id})"
        self.now_ms = now_ms
        self._url = url
        self._conn = conn
        self._busy_timeout = busy_timeout
        self._schema = schema

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def close(self) -> None:
        """End the exporting transaction (the snapshot is gone with it)."""
        close_quietly(self._conn, "the snapshot's connection")

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        try:
            if not parameters:
                return [tuple(row) for row in self._conn.execute(sql).fetchall()]
            return [tuple(row) for row in self._conn.execute(placeholders(sql), parameters).fetchall()]
        except psycopg.Error as exc:
            raise translate(exc, self._url, self._busy_timeout) from exc

    def jdbc(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self._url)
        port = f":{parts.port}" if parts.port else ""
        # durableq's schema, where the readers' SQL names its tables unqualified: in the URL, as Spark
        # passes its options to the driver with their names in lower case, which pgjdbc does not read.
        url = (
            f"jdbc:postgresql://{parts.hostname or 'localhost'}{port}{parts.path or '/'}"
            f"?currentSchema={self._schema}"
        )
        # The libpq URL's parameters (sslmode, ...) are pgjdbc's connection properties too.
        properties = {key: value for key, value in parse_qsl(parts.query)}
        if parts.username:
            properties["user"] = parts.username
        if parts.password:
            properties["password"] = parts.password
        properties.update(
            connectTimeout=str(max(1, round(self._busy_timeout))),
            sessionInitStatement=(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                f"SET TRANSACTION SNAPSHOT '{self.snapshot_id}'"
            ),
        )
        return url, properties


def export(url: str, schema: str, clock: Callable[[], float], busy_timeout: float) -> ExportedTransaction:
    """Begin the transaction whose snapshot readers read (settled: it waits for the writes under way),
    and check the database is durableq's at this code's schema revision."""
    conn = connect_raw(url, "normal", busy_timeout, schema)
    settled = begins(schema)
    try:
        # A settled snapshot (as the library's readers take): every event id at or below the highest
        # it holds has committed or never will, so an incremental export resumes after it safely.
        conn.execute(settled.settled_barrier)
        conn.execute(settled.settled_begin)
        version_table = f"{schema}.{VERSION_TABLE}"
        row = conn.execute("SELECT pg_export_snapshot(), to_regclass(%s)", (version_table,)).fetchone()
        assert row is not None
        snapshot_id, has_version = row
        # The clock is read after the export: every message in the snapshot was written before "now".
        now_ms = int(clock() * 1000)
        if has_version is None:
            raise NotADurableQDatabase(f"{redacted(url)} holds no durableq tables in schema {schema}")
        version = conn.execute(f"SELECT version_num FROM {version_table}").fetchone()
        check_readable(redacted(url), None if version is None else version[0])
    except psycopg.Error as exc:
        conn.close()
        raise translate(exc, url, busy_timeout) from exc
    except BaseException:
        conn.close()
        raise
    log.debug("snapshot %s of %s at %s", snapshot_id, redacted(url), now_ms)
    return ExportedTransaction(url, conn, str(snapshot_id), now_ms, busy_timeout, schema)
