"""What an application's statement may be inside a transaction durableq holds (``tx.execute``).

One statement, of any kind but those that end or reshape the transaction itself: a ``COMMIT`` run
through ``tx.execute`` would commit durableq's work of the block half-way (a transactional worker's
effects without the message's delete: the effect twice when the message comes back), and a
``ROLLBACK`` would drop what the block already did while the block goes on.  The transaction's end is
its block's (or, on the application's own connection, the application's commit).
"""

from __future__ import annotations

import re

from ..errors import InvalidParameterValue

#: Statements that begin, end or split a transaction (SQLite's and PostgreSQL's words for them).
_CONTROL = frozenset(
    {"BEGIN", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "START", "PREPARE"}
)
#: What is not the statement's words: string literals, quoted names, dollar-quoted bodies, comments.
_NOT_WORDS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$(\w*)\$.*?\$\1\$|--[^\n]*|/\*.*?\*/", re.S)


def check(sql: str) -> None:
    """Raise ``InvalidParameterValue`` unless ``sql`` is one statement that leaves the transaction
    as it is."""
    words = _NOT_WORDS.sub(" ", sql)
    body = words.strip().rstrip(";").strip()
    if ";" in body:
        raise InvalidParameterValue(
            "tx.execute runs one statement at a time; got several (separated by ';'): call it once for each"
        )
    first = body.split(None, 1)[0].upper() if body else ""
    if first in _CONTROL:
        raise InvalidParameterValue(
            f"tx.execute cannot run {first}: the transaction ends with its block (leaving it commits, "
            "an exception rolls back); on your own connection, commit or roll back on it as usual"
        )
