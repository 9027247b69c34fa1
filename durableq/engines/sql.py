"""The few SQL fragments that differ between engines, written once in SQLite's spelling.

The operations write their statements once, in SQLite's SQL, and take what must differ per engine
from here.  SQLite runs them as written; :mod:`.postgres` spells each statement anew once (cached),
replacing exactly these fragments with PostgreSQL's (see its ``_SPELLINGS``) and the parameter
style.  A fragment used without this module would be missed there: keep them all here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable


def in_ids(param: str) -> str:
    """SQL for the set of row ids in parameter ``param``, bound to :func:`encode_ids` of a list."""
    return f"(SELECT value FROM json_each({param}))"


def in_texts(param: str) -> str:
    """SQL for the set of strings in parameter ``param``, bound to :func:`encode_ids` of a list."""
    return f"(SELECT CAST(value AS TEXT) FROM json_each({param}))"


def encode_ids(ids: Iterable[int | str]) -> str:
    """The bound value of an :func:`in_ids` or :func:`in_texts` parameter (one parameter for any
    number of values)."""
    return json.dumps(list(ids))


def byte_length(column: str) -> str:
    """SQL for the length in bytes (UTF-8) of the text ``column``."""
    return f"length(CAST({column} AS BLOB))"


#: A claim's row picker ends with this: rows another transaction is claiming right now are passed
#: over, not waited for (PostgreSQL's ``FOR UPDATE SKIP LOCKED``; SQLite has one writer at a time,
#: so there is nothing to pass over and the comment is all that remains).
SKIP_LOCKED = "/* FOR UPDATE SKIP LOCKED */"

#: 8 random bytes in hex, in each engine's SQL (a new row's secret, a handle's nonce).
RANDOM_HEX = "lower(hex(randomblob(8)))"
#: PostgreSQL's: the first 64 bits of the MD5 of a random UUID (gen_random_uuid draws from the
#: operating system's CSPRNG, and needs no extension since PostgreSQL 13).
RANDOM_HEX_PG = "left(md5(CAST(gen_random_uuid() AS text)), 16)"

#: A new receipt handle of a message row: queue id, row id, the row's secret, 8 random bytes in hex.
NEW_HANDLE = f"printf('%d.%d.%s.%s', queue_id, id, secret, {RANDOM_HEX})"

#: The catalog's counter of changes to queue rows (see ops/queue_rows.Catalog).
CATALOG_VERSION = "PRAGMA user_version"


def catalog_bump(version: int) -> str:
    """The statement that sets the catalog's counter to ``version``."""
    return f"PRAGMA user_version = {version}"
