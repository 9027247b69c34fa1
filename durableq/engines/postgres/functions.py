"""One server call per one-statement write: the writers' lock, the statement and the ``NOTIFY`` if a
long poll listens, in a PL/pgSQL function of the connection's own, called with bound parameters.

Why: a one-statement write sent as one query string (``BEGIN; EXECUTE <lock>; EXECUTE <statement>
(values); EXECUTE <notify if listening>; COMMIT``, :mod:`.prepared`) makes the server parse the
string, open a portal and send a reply per statement, and parse and coerce the statement's values from
the text at every run: in a ``perf`` profile of the backend over send → receive → delete cycles,
parsing the strings took 6 % of its CPU and the ``EXECUTE``s' own work (values, plan lookup, portal)
13 % (issue 30; docs/benchmarks.md, W19).  A call of a function prepared on the connection (extended
protocol: the values bound, nothing parsed; :class:`Call`) runs the same steps as one statement, in its
own transaction (the connection is in autocommit mode), whose commit follows the function's end.

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
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors, generators, pq
from psycopg.abc import Transformer

log = logging.getLogger(__name__)

#: How a result-less statement's changed-row count comes back.
_COUNT = "_durableq_changed"


class Rows:
    """A call's result: its rows (none for a statement without rows), and ``rowcount``, the rows it
    returned or, for a statement without rows, the function's changed-row count."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Any:
        return iter(self.fetchall())

    def close(self) -> None:
        self._rows = []


class Plain(Exception):
    """A value the call does not send itself (not an ``int``, ``str``, ``bool``, ``float``, ``bytes`` or
    None, or text with a NUL character): psycopg binds it, on the query string."""


#: The values' text forms, as the server reads a parameter of the function's type (``bytes``: binary).
_TRUE, _FALSE = b"t", b"f"


def _values(values: Sequence[object]) -> tuple[list[bytes | None], list[int]]:
    """``values`` as the call sends them, and their formats (text 0, binary 1); :class:`Plain` if one is
    not a plain value.  Why not psycopg's adaptation: a lookup of a dumper per value, a buffer per value
    and a query object per call cost more client CPU than the server spends on the statement
    (issue 30); a plain value's text form is what psycopg's own text dumpers send."""
    out: list[bytes | None] = []
    formats: list[int] = []
    for value in values:
        kind = type(value)
        if kind is str:
            if "\x00" in value:  # type: ignore[operator]
                raise Plain  # psycopg refuses it with its own error, translated as today
            out.append(value.encode())  # type: ignore[attr-defined]
            formats.append(0)
        elif kind is int:
            out.append(b"%d" % value)  # type: ignore[str-format]
            formats.append(0)
        elif value is None:
            out.append(None)
            formats.append(0)
        elif kind is bool:
            out.append(_TRUE if value else _FALSE)
            formats.append(0)
        elif kind is bytes:
            out.append(value)  # type: ignore[arg-type]
            formats.append(1)  # bytea's binary form: the bytes as they are
        elif kind is float:
            out.append(repr(value).encode())
            formats.append(0)
        else:
            raise Plain
    return out, formats


class Call:
    """A statement's function, called through libpq's prepared-statement calls (``send_query_prepared``,
    its values bound as text, the result read straight from the ``PGresult``): not psycopg's cursor,
    whose query conversion, prepare cache, adaptation and result handling were 43 % of a cycle's
    client CPU (issue 30).  Errors are psycopg's (:func:`psycopg.errors.error_from_result`), translated
    by the engine as any other; the call waits as psycopg's own calls do (an interrupt cancels it)."""

    __slots__ = ("_name", "_query", "_types", "rows")

    def __init__(self, name: str, query: str, types: Sequence[int], rows: bool) -> None:
        self._name = name.encode()
        self._query = query.encode()
        self._types = tuple(types)
        #: Does it return the statement's rows (else the changed-row count)?
        self.rows = rows

    def prepare(self, raw: psycopg.Connection[Any]) -> None:
        """Prepare the call on ``raw`` (idle), once per connection (again after a ``DEALLOCATE``)."""
        with raw.lock:
            raw.pgconn.send_prepare(self._name, self._query, param_types=self._types)
            (result,) = raw.wait(generators.execute(raw.pgconn))
        if result.status != pq.ExecStatus.COMMAND_OK:
            error = errors.error_from_result(result, encoding=raw.info.encoding)
            if not isinstance(error, errors.DuplicatePreparedStatement):
                raise error  # (prepared already: by a variant whose types the server read alike)

    def run(self, raw: psycopg.Connection[Any], loader: Transformer, values: Sequence[object]) -> Rows:
        """One call with ``values``: its rows, or its changed-row count (see :class:`Rows`)."""
        params, formats = _values(values)
        result = self._send(raw, params, formats)
        if result.status == pq.ExecStatus.FATAL_ERROR:
            error = errors.error_from_result(result, encoding=raw.info.encoding)
            if not isinstance(error, errors.InvalidSqlStatementName):
                raise error
            # Deallocated since (psycopg's DEALLOCATE ALL after a ROLLBACK): nothing ran.
            self.prepare(raw)
            result = self._send(raw, params, formats)
            if result.status == pq.ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=raw.info.encoding)
        if not self.rows:
            return Rows([], int(result.get_value(0, 0) or 0))
        count = result.ntuples
        if not count:
            return Rows([], 0)
        loader.set_pgresult(result)
        return Rows(loader.load_rows(0, count, tuple), count)

    def _send(self, raw: psycopg.Connection[Any], params: list[bytes | None], formats: list[int]) -> Any:
        with raw.lock:
            raw.pgconn.send_query_prepared(self._name, params, param_formats=formats)
            results = raw.wait(generators.execute(raw.pgconn))
        return results[-1]


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
) -> Call | None:
    """Create the function of the statement prepared as ``prepared`` on ``raw`` (idle), whose text is
    ``body`` (parameters ``$1``...), between ``begin`` and ``end`` (see :func:`framed`), and prepare its
    call.  Returns the :class:`Call`, or None if it cannot be made (the query string stays);
    :class:`Unprepared` if the statement was deallocated since (psycopg's ``DEALLOCATE ALL`` after a
    rollback)."""
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
        arguments = ", ".join(f"${n}" for n in range(1, len(params) + 1))
        call = Call(name, f"SELECT * FROM pg_temp.{name}({arguments})", params, bool(columns))
        call.prepare(raw)
    except psycopg.Error:
        log.debug("no function for %s: the query string stays", prepared, exc_info=True)
        return None
    return call
