"""PostgreSQL's errors as durableq errors: every psycopg error the engine meets is translated here
(raise the result ``from`` the driver's error), with the URL's secrets scrubbed from its text."""

from __future__ import annotations

import psycopg
from psycopg import errors as pgerrors

from ...errors import DatabaseError, DatabaseFull, DatabaseLocked, DatabaseReadOnly, InvalidParameterValue
from ..urls import redacted, scrubbed


def translate(exc: psycopg.Error, location: str, busy_timeout: float) -> DatabaseError:
    """The durableq error for a driver error (raise it ``from exc``)."""
    where = redacted(location)
    said = scrubbed(str(exc).strip(), location)
    text = said.splitlines()[0] if said else type(exc).__name__
    if isinstance(exc, (pgerrors.LockNotAvailable, pgerrors.DeadlockDetected, pgerrors.SerializationFailure)):
        return DatabaseLocked(
            f"{where}: a lock stayed taken by another connection for more than {busy_timeout:g} s, "
            f"or two writes crossed ({text}); retry, or raise busy_timeout"
        )
    if isinstance(exc, (pgerrors.DiskFull, pgerrors.InsufficientResources)):
        return DatabaseFull(f"{where}: the server is out of room ({text}); nothing was written")
    if isinstance(exc, (pgerrors.ReadOnlySqlTransaction, pgerrors.InsufficientPrivilege)):
        return DatabaseReadOnly(f"{where} cannot be written: {text}")
    if isinstance(exc, pgerrors.QueryCanceled):  # an OperationalError, but the server answered
        return DatabaseError(
            f"{where}: the server cancelled the statement ({text}: its statement_timeout, or a cancel "
            "request); the operation was not done"
        )
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseError(f"{where}: cannot reach the database ({text}); the operation was not done")
    return DatabaseError(f"{where}: {text}")


def unstorable(exc: Exception) -> InvalidParameterValue:
    return InvalidParameterValue(f"an argument holds text that cannot be stored in PostgreSQL: {exc}")


def refused(exc: psycopg.Error) -> bool:
    """Is ``exc`` psycopg refusing an argument before sending it (text with a NUL character, which
    PostgreSQL's text cannot hold, though SQLite's can): the caller's mistake, not the database's?"""
    return isinstance(exc, psycopg.DataError) and exc.sqlstate is None
