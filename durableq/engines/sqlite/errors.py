"""SQLite's errors as durableq errors: every ``sqlite3`` error the engine meets is translated here
(raise the result ``from`` the driver's error), so nothing above the engine sees the driver."""

from __future__ import annotations

import os
import resource
import sqlite3
from pathlib import Path

from ...errors import (
    DatabaseCorrupt,
    DatabaseError,
    DatabaseFull,
    DatabaseLocked,
    DatabaseReadOnly,
    InvalidParameterValue,
)


def translate(exc: sqlite3.Error, path: Path, busy_timeout: float) -> DatabaseError:
    """The durableq error for a driver error (raise it ``from exc``)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return DatabaseLocked(
            f"{path} stayed locked by another connection for more than {busy_timeout:g} s "
            "(the busy timeout); retry, or raise busy_timeout"
        )
    if name.startswith("SQLITE_NOTADB") or "not a database" in text:
        return DatabaseCorrupt(
            f"{path} is not an SQLite database, or its header is damaged ({text}); it was left untouched"
        )
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return DatabaseCorrupt(f"{path} is damaged ({text})")
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        return DatabaseReadOnly(f"{path} cannot be written: {text}; check the file and directory permissions")
    if name.startswith("SQLITE_FULL") or "disk is full" in text or "file too large" in text:
        return DatabaseFull(f"{path}: the disk or a file size limit is full ({text}); nothing was written")
    if name.startswith("SQLITE_CANTOPEN"):
        return DatabaseError(
            f"{path} cannot be opened: {text}; check that the directory exists and is writable"
        )
    if name.startswith("SQLITE_IOERR"):
        # SQLite says only "disk I/O error"; a full disk or a file size limit are the common causes.
        cause = no_room(path)
        if cause:
            return DatabaseFull(f"{path}: {cause}; the operation was not done (nothing was committed)")
        return DatabaseError(f"{path}: {text} ({name}); the operation was not done: check the disk")
    return DatabaseError(f"{path}: {text}")


def unstorable(exc: UnicodeEncodeError) -> InvalidParameterValue:
    # The last line of defence: arguments are checked before they reach SQLite, but text with a
    # lone surrogate must never escape as a UnicodeEncodeError from the driver.
    return InvalidParameterValue(
        f"an argument holds text that cannot be stored (a lone surrogate): {exc.reason}"
    )


def no_room(path: Path) -> str | None:
    """Why a write to ``path`` could fail for lack of room, if it could: no space or a size limit."""
    try:
        limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        sizes = [os.path.getsize(f) for f in (path, Path(f"{path}-wal")) if os.path.exists(f)]
        if limit != resource.RLIM_INFINITY and any(size + 65_536 >= limit for size in sizes):
            return f"the file size limit of this process ({limit} bytes, RLIMIT_FSIZE) is reached"
        space = os.statvfs(path.parent)
        if space.f_bavail * space.f_frsize < 1_048_576:
            return "the disk is full (less than 1 MiB free)"
    except OSError:
        return None
    return None
