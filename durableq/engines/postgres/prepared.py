"""One round trip per one-statement transaction: the statement prepared once per connection, then
``BEGIN``, the writers' lock, ``EXECUTE`` and the commit's statements sent as one query string.

Why not psycopg's pipeline mode, which also sends them in one round trip: its Python side (a queue of
commands, one result handler each, a ``Sync``) costs more client CPU than the server spends on the
whole transaction; one query string of five statements, its values bound by psycopg's own quoting
(:class:`psycopg.ClientCursor`), costs a third of it.  A query string is parsed and planned at each
run, so the statement itself is prepared once per connection (``PREPARE``, on its own, while the
connection is idle) and the string runs ``EXECUTE name(values)``: planned once, as psycopg's own
prepared statements are.

Values are never formatted into SQL text by durableq: the ``EXECUTE``'s arguments are psycopg's
placeholders, bound and quoted by psycopg (:meth:`psycopg.ClientCursor.execute`).

Parameter types: a prepared statement's parameters have types, fixed when it is prepared.  They are
declared from the values as psycopg's server-side binding sends them (an ``int`` as the smallest
integer type that holds it; text and ``NULL`` as ``unknown``, the type inferred from where the
parameter is used), so a statement means what it meant bound by psycopg; as psycopg does, a statement
has one prepared statement per combination of its values' types.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors
from psycopg.adapt import Transformer

from ... import limits
from ..base import Cursor, Params
from . import functions

#: A statement's variant between its transaction's ``begin`` and ``end`` statements.
_Framed = tuple[str, tuple[str, ...], tuple[str, ...]]
#: A statement's variant whose call was not looked at yet.
_UNMADE = object()

#: Statements PostgreSQL can prepare (the others run as they are, their values bound the same way).
_PREPARABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES")
#: A value's declared type in ``PREPARE`` (see the module's docstring); anything else: ``unknown``.
_TYPES: dict[type, str] = {bool: "boolean", float: "double precision", bytes: "bytea"}

_PARAMETER = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|::|:([A-Za-z_]\w*)|\?", re.S)


_SQLITE_PARAMETER = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|::|:([A-Za-z_]\w*)|\?|%", re.S)


@lru_cache(maxsize=1024)
def placeholders(statement: str) -> str:
    """``statement`` with sqlite3's parameters (``:name``, ``?``) as psycopg's (``%(name)s``, ``%s``),
    and every other ``%`` doubled (psycopg reads ``%%`` as ``%`` where parameters are bound); string
    literals, comments and ``::`` casts as they are.  Once per statement text.  (Only the parameter
    style: the SQL itself is the operations', fragments from :data:`..dialect.POSTGRES`.)"""

    def placeholder(match: re.Match[str]) -> str:
        token = match.group(0)
        if match.group(1) is not None:
            return f"%({match.group(1)})s"
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return token.replace("%", "%%")  # a string literal, a comment or a cast, as it is

    return _SQLITE_PARAMETER.sub(placeholder, statement)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A statement in the shape of ``PREPARE`` and ``EXECUTE``."""

    #: The statement's digest: its prepared statements' names begin with it.
    digest: str
    #: The statement with PostgreSQL's positional parameters (``$1``...).
    body: str
    #: The parameters in ``$n`` order: names (a mapping's keys) or positions (a sequence's).
    order: tuple[str | int, ...]
    #: Its variants so far, by the types of their parameters (see :meth:`variant`).
    variants: dict[tuple[str, ...], Variant]

    def variant(self, parameters: Params) -> Variant:
        """The prepared statement for values of these types (see the module's docstring)."""
        # A mapping's keys or a sequence's positions, looked up alike (no isinstance of an ABC: this
        # runs at every statement, and the generic form cost ~25 µs a cycle; issue 30).
        types = tuple(map(_type, map(parameters.__getitem__, self.order)))  # type: ignore[arg-type]
        found = self.variants.get(types)
        if found is None:
            found = self.variants[types] = self._variant(types)
        return found

    def _variant(self, types: tuple[str, ...]) -> Variant:
        tag = hashlib.sha256(repr(types).encode()).hexdigest()[:8]
        name = f"durableq_{self.digest}_{tag}"
        if not self.order:
            return Variant(name, f"PREPARE {name} AS {self.body}", f"EXECUTE {name}")
        arguments = ", ".join(f"%({key})s" if isinstance(key, str) else "%s" for key in self.order)
        return Variant(
            name, f"PREPARE {name} ({', '.join(types)}) AS {self.body}", f"EXECUTE {name}({arguments})"
        )


@dataclass(frozen=True, slots=True)
class Variant:
    """One prepared statement of a :class:`Prepared`: its parameters' types fixed."""

    #: Its name on a connection.
    name: str
    #: ``PREPARE name (types) AS ...``.
    declaration: str
    #: ``EXECUTE name(%(a)s, %s, ...)``: psycopg's placeholders, bound by the client cursor.
    execute: str


def _type(value: object) -> str:
    """The type psycopg's server-side binding gives ``value`` (the smallest integer type it fits)."""
    if type(value) is int:
        if -(2**15) <= value < 2**15:
            return "smallint"
        if -(2**31) <= value < 2**31:
            return "integer"
        return "bigint" if -(2**63) <= value < 2**63 else "numeric"
    return _TYPES.get(type(value), "unknown")


@lru_cache(maxsize=1024)
def prepared(statement: str) -> Prepared | None:
    """``statement`` (sqlite3's parameter style: ``:name`` or ``?``) as a :class:`Prepared`, or None if
    PostgreSQL cannot prepare it.  Once per statement text."""
    if not statement.lstrip().upper().startswith(_PREPARABLE):
        return None
    order: list[str | int] = []

    def positional(match: re.Match[str]) -> str:
        token, name = match.group(0), match.group(1)
        if name is None and token != "?":
            return token  # a string literal, a comment or a cast, as it is
        if name is None:
            order.append(len(order))
            return f"${len(order)}"
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    body = _PARAMETER.sub(positional, statement.strip())
    return Prepared(hashlib.sha256(statement.encode()).hexdigest()[:16], body, tuple(order), {})


class Statements:
    """The statements one connection prepared, and its one-round-trip transactions."""

    __slots__ = ("_calls", "_frames", "_loader", "_prepared", "_raw")

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw
        #: Reads a call's rows with the connection's loaders (see :class:`.functions.Call`).
        self._loader = Transformer(raw)
        #: By name: prepared (True), or seen once (False; prepared if it runs again).
        self._prepared: dict[str, bool] = {}
        #: By ``begin`` and ``end``: their text before and after a statement's (see :meth:`_frame`).
        self._frames: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, str]] = {}
        #: By prepared statement, ``begin`` and ``end``: its function's call (see :mod:`.functions`), or
        #: None where none could be made (or the statement is not a transaction of its own).
        self._calls: dict[_Framed, functions.Call | None] = {}

    def round_trip(
        self,
        statement: str,
        parameters: Params,
        begin: tuple[str, ...],
        end: tuple[str, ...],
        rollback: Callable[[], None],
    ) -> Cursor:
        """``statement`` between the engine's own ``begin`` and ``end`` statements, in one round trip:
        one query string, the statement prepared on the connection from its second run (a statement
        past :data:`..limits.POSTGRES_PREPARED_STATEMENTS` runs unprepared), the engine's own
        ``SELECT``s (the writers' lock, the ``NOTIFY`` if listening) from their first; or, for a
        prepared statement in a transaction of its own, one call of its function (:mod:`.functions`),
        made when the statement is prepared.  If one fails
        (the writers' lock timed out, the statement, the commit), the server skips the rest and the
        error is the first one's; the connection is then in a failed transaction, which the caller
        rolls back (nothing was prepared in it: a ``PREPARE`` runs on its own, beforehand, the
        connection idle).  ``rollback``: the connection's, for a statement deallocated since (below)."""
        plan = prepared(statement)
        variant = None if plan is None else plan.variant(parameters)
        if variant is not None:
            seen = self._prepared.get(variant.name)
            if seen is None and len(self._prepared) < limits.POSTGRES_PREPARED_STATEMENTS:
                self._prepared[variant.name] = False
            elif seen is False:
                self._prepare(variant)
            if not self._prepared.get(variant.name):
                variant = None
        if variant is not None:
            key = (variant.name, begin, end)
            call = self._calls.get(key, _UNMADE)
            if call is _UNMADE:
                call = None
                try:
                    if functions.framed(begin, end):
                        assert plan is not None
                        call = functions.make(self._raw, variant.name, plan.body, begin, end)
                    self._calls[key] = call
                except functions.Unprepared:
                    pass  # the query string finds it deallocated and prepares it again; made next time
            if call is not None:
                assert plan is not None and isinstance(call, functions.Call)
                try:
                    return self._call(call, plan.order, parameters)
                except (errors.UndefinedFunction, errors.DatatypeMismatch):
                    # Dropped since (a DISCARD on this session), or its rows' types are no longer the
                    # statement's (a migration altered a column it returns: the server refuses every
                    # call, "structure of query does not match function result type"): the query
                    # string this time (nothing was committed: the call was its own transaction), and
                    # a function of the statement as it is now made at its next run.
                    del self._calls[key]
                except functions.Plain:
                    pass  # a value psycopg binds: the query string this time
        text = placeholders(statement) if variant is None else variant.execute
        try:
            return self._send(begin, text, end, parameters)
        except (errors.InvalidSqlStatementName, errors.FeatureNotSupported) as exc:
            # Deallocated since: psycopg sends DEALLOCATE ALL after a ROLLBACK (or a DROP...) on a
            # connection where it prepared statements of its own.  Or its rows' types changed since
            # it was prepared ("cached plan must not change result type", at every run until it is
            # prepared again).  Nothing is committed (the string is one transaction, which failed
            # at its statement, its first or after the engine's own): roll back, prepare again,
            # and send it again.
            changed = isinstance(exc, errors.FeatureNotSupported)
            if changed and variant is None:
                raise
            rollback()
            self._prepared, self._frames = {}, {}
            if variant is not None:
                if changed:
                    self._deallocate(variant)
                self._prepare(variant)
            return self._send(begin, text, end, parameters)

    def _call(self, call: functions.Call, order: tuple[str | int, ...], parameters: Params) -> Cursor:
        """One call of a statement's function (see :mod:`.functions`): its rows, or its changed-row
        count, as a :class:`.functions.Rows`."""
        return call.run(self._raw, self._loader, list(map(parameters.__getitem__, order)))  # type: ignore[arg-type]

    def _send(
        self, begin: tuple[str, ...], text: str, end: tuple[str, ...], parameters: Params
    ) -> psycopg.Cursor[Any]:
        """One query string: ``begin``, ``text`` (its values bound by psycopg), ``end``; the cursor at
        ``text``'s result."""
        before, after = self._frames.get((begin, end)) or self._frame(begin, end)
        raw = self._raw
        cursor = psycopg.ClientCursor(raw)
        # psycopg's own cache of statements to prepare would count this text (its values in it: a new
        # entry each time), then drop it as a string of several statements: not asked (~10 µs).
        threshold, raw.prepare_threshold = raw.prepare_threshold, None
        try:
            cursor.execute(f"{before}{text}{after}", parameters)
        finally:
            raw.prepare_threshold = threshold
        for _ in begin:
            cursor.nextset()
        return cursor

    def _frame(self, begin: tuple[str, ...], end: tuple[str, ...]) -> tuple[str, str]:
        """``begin``'s and ``end``'s statements as the text before and after a statement's (their
        ``SELECT``s prepared now if they are not yet), kept until the connection's prepared
        statements are deallocated: built once, not at every statement (~20 µs a cycle; issue 30)."""
        own = self._own
        frame = "".join(f"{own(s)}; " for s in begin), "".join(f"; {own(s)}" for s in end)
        self._frames[begin, end] = frame
        return frame

    def _own(self, statement: str) -> str:
        """One of the engine's own statements (no parameters): its ``EXECUTE`` if it is a ``SELECT``
        (prepared now if it is not yet: parsed and planned once per connection, not at every run)."""
        if not statement.startswith("SELECT"):
            return statement  # BEGIN, COMMIT
        plan = prepared(statement)
        assert plan is not None
        variant = plan.variant(())
        if self._prepared.get(variant.name) is not True:
            self._prepare(variant)
        return variant.execute

    def _deallocate(self, variant: Variant) -> None:
        """``DEALLOCATE`` one prepared statement, the connection idle (gone already: fine)."""
        try:
            self._raw.execute(f"DEALLOCATE {variant.name}")
        except errors.InvalidSqlStatementName:
            pass  # deallocated with the others (psycopg's DEALLOCATE ALL after the rollback)

    def _prepare(self, variant: Variant) -> None:
        """``PREPARE`` on its own, the connection idle (so that no failed transaction can undo it)."""
        try:
            self._raw.execute(variant.declaration)
        except errors.DuplicatePreparedStatement:
            pass  # prepared by a call cut off before it could note it
        self._prepared[variant.name] = True
