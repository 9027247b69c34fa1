"""The SQLite engine's connection: ``sqlite3``'s own (every statement straight to the driver, nothing
in between on the hot path), with what the operations ask of a connection besides
(:class:`..base.Connection`)."""

from __future__ import annotations

import sqlite3

from ..dialect import SQLITE


class SqliteConnection(sqlite3.Connection):
    """A ``sqlite3`` connection that says its dialect (made by ``sqlite3.connect(factory=...)``)."""

    dialect = SQLITE
