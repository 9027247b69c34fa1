"""One server call per one-statement write: the writers' lock, the statement and the ``NOTIFY`` if a
long poll listens, in a PL/pgSQL function of the connection's own, called with bound parameters.

Why: a one-statement write sent as one query string (``BEGIN; EXECUTE <lock>; EXECUTE <statement>
(values); EXECUTE <notify if listening>; COMMIT``, :mod:`.prepared`) makes the server parse the
string, open a portal and send a reply per statement, and parse and coerce the statement's values from
the text at every run: in a ``perf`` profile of the backend over send → receive → delete cycles,
parsing the strings took 6 % of its CPU and the ``EXECUTE``s' own work (values, plan lookup, portal)
13 % (issue 30; docs/benchmarks.md, W19).  A call of a function prepared by psycopg (extended protocol: the
values bound, nothing parsed) runs the same steps as one statement, in its own transaction (the
connection is in autocommit mode), whose commit follows the function's end.

Why a temporary function per connection (``pg_temp``), built from the statement itself, and not one
installed by a migration: the function is the operation's statement as the running code has it (a
statement changed in a later release makes a function of another name), so no migration must copy
the operations' SQL and keep it in step, no connection of an older release ever calls a function a
later revision replaced, and a function goes with its session.  It costs one ``CREATE FUNCTION`` per
connection and statement, when the statement is prepared, at its second run (the hot statements
only, as many as :data:`..limits.POSTGRES_PREPARED_STATEMENTS` allows to be prepared).

The guarantees stay those of the query string: the writers' lock is taken shared before the
statement runs (the statement's tables are locked and planned after it, inside the function, so a
migration holding the lock is waited for as before) and held until the commit; the listeners' lock
is tried after the statement, still under the writers' lock (see :mod:`.locks`); a failure anywhere
rolls the whole transaction back and leaves the connection idle.  Where a function cannot be made
(no ``TEMP`` privilege, say), the statement keeps the query string.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import psycopg
from psycopg import errors, pq

log = logging.getLogger(__name__)

#: How a result-less statement's changed-row count comes back.
_COUNT = "_durableq_changed"


class Counted:
    """The result of a statement without rows (the function's changed-row count): its ``rowcount``."""

    __slots__ = ("rowcount",)

    def __init__(self, rowcount: int) -> None:
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Any:
        return iter(())

    def close(self) -> None:
        pass


class Unprepared(Exception):
    """The statement is no longer prepared on the connection (deallocated since): no function now."""


def framed(begin: tuple[str, ...], end: tuple[str, ...]) -> bool:
    """Can a statement between ``begin`` and ``end`` be one function call: its own transaction (``BEGIN``
    first, ``COMMIT`` last), the engine's ``SELECT``s between?"""
    return (
        len(begin) > 0
        and begin[0] == "BEGIN"
        and len(end) > 0
        and end[-1] == "COMMIT"
        and all(s.startswith("SELECT ") for s in (*begin[1:], *end[:-1]))
    )


def make(
    raw: psycopg.Connection[Any], prepared: str, body: str, begin: tuple[str, ...], end: tuple[str, ...]
) -> tuple[str, bool] | None:
    """Create the function of the statement prepared as ``prepared`` on ``raw`` (idle), whose text is
    ``body`` (parameters ``$1``...), between ``begin`` and ``end`` (see :func:`framed`).  Returns the
    call (psycopg's placeholders, one per parameter) and whether it returns the statement's rows (else
    the changed-row count), or None if it cannot be made (the query string stays); :class:`Unprepared`
    if the statement was deallocated since (psycopg's ``DEALLOCATE ALL`` after a rollback)."""
    try:
        described = raw.pgconn.describe_prepared(prepared.encode())
        if described.status != pq.ExecStatus.COMMAND_OK:
            raise Unprepared(prepared)
        params = [described.param_type(i) for i in range(described.nparams)]
        fields = [(described.ftype(i), described.fmod(i)) for i in range(described.nfields)]
        (names,) = raw.execute(
            "SELECT array(SELECT format_type(t, NULLIF(m, -1)) FROM unnest(%s::oid[], %s::int[]) "
            "WITH ORDINALITY AS u(t, m, n) ORDER BY n)",
            ([*params, *(t for t, _ in fields)], [*([-1] * len(params)), *(m for _, m in fields)]),
        ).fetchone()  # type: ignore[misc]
        types, columns = names[: len(params)], names[len(params) :]
        before = "".join(f"  PERFORM {s.removeprefix('SELECT ')};\n" for s in begin[1:])
        after = "".join(f"  PERFORM {s.removeprefix('SELECT ')};\n" for s in end[:-1])
        if columns:
            returns = f"TABLE ({', '.join(f'_durableq_{i} {t}' for i, t in enumerate(columns))})"
            run = f"  RETURN QUERY WITH statement AS ({body}) SELECT * FROM statement;\n"
            finish = "  RETURN;\n"
            declare = ""
        else:
            returns = "bigint"
            run = f"  {body};\n  GET DIAGNOSTICS {_COUNT} = ROW_COUNT;\n"
            finish = f"  RETURN {_COUNT};\n"
            declare = f"DECLARE {_COUNT} bigint;\n"
        source = f"{declare}BEGIN\n{before}{run}{after}{finish}END"
        name = f"durableq_{hashlib.sha256(f'{types}{returns}{source}'.encode()).hexdigest()[:24]}"
        try:
            raw.execute(
                f"CREATE FUNCTION pg_temp.{name}({', '.join(types)}) RETURNS {returns} "
                f"LANGUAGE plpgsql AS $durableq$\n{source}\n$durableq$"
            )
        except errors.DuplicateFunction:
            pass  # made for another variant whose values' types the server read alike
    except psycopg.Error:
        log.debug("no function for %s: the query string stays", prepared, exc_info=True)
        return None
    return f"SELECT * FROM pg_temp.{name}({', '.join(['%s'] * len(params))})", bool(columns)
