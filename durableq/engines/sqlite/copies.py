"""Copies of a SQLite file taken while it is in use: ``backup()``'s.

SQLite's online backup API copies every page in one step inside one read transaction of the source,
so a copy is one committed state, whatever writers do meanwhile."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...errors import DatabaseError, InvalidParameterValue
from .. import forks
from ..files import fsync_path
from .connection import SqliteConnection
from .errors import translate


def backup(
    connection: Callable[[], SqliteConnection], dest: Path, file_mode: int, busy_timeout: float
) -> None:
    """Copy the database into the new file ``dest`` with SQLite's online backup API.

    The copy is one committed state, taken in one step inside one read
    transaction of this thread's connection: it holds what is still in the
    WAL, and writers (WAL mode) go on meanwhile.  It is written under a
    temporary name in ``dest``'s folder, fsynced, and only then linked as
    ``dest``, so ``dest`` never exists half-written; an existing ``dest`` is
    refused, never replaced.
    """
    try:
        os.lstat(dest)
    except FileNotFoundError:
        pass  # as it should be; a missing folder is named below
    except (ValueError, UnicodeEncodeError) as exc:  # a NUL byte, or text no file name can hold
        raise InvalidParameterValue(f"path {str(dest)[:200]!r} is not a usable file name: {exc}") from None
    except OSError as exc:
        raise InvalidParameterValue(f"cannot write {dest}: {exc.strerror or exc}") from exc
    else:
        raise InvalidParameterValue(f"{dest} exists; a backup is written to a new file (remove it first)")
    folder = dest.parent
    if not folder.is_dir():
        raise InvalidParameterValue(f"cannot write {dest}: the folder {folder} does not exist")
    try:
        fd, partial = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=folder)
    except OSError as exc:
        raise DatabaseError(f"cannot write {dest}: {exc.strerror or exc}") from exc
    os.close(fd)  # a new file no connection has open: closing it drops no lock
    try:
        os.chmod(partial, file_mode)
        with forks.INSIDE:
            _copy_into(connection(), Path(partial), dest, busy_timeout)
        fsync_path(partial)
        os.link(partial, dest)  # unlike rename, never replaces a file that appeared meanwhile
        fsync_path(folder)
    except FileExistsError as exc:
        raise InvalidParameterValue(
            f"{dest} appeared while the backup was written; it was left as is"
        ) from exc
    except OSError as exc:
        raise DatabaseError(f"cannot write {dest}: {exc.strerror or exc}") from exc
    finally:
        for leftover in (partial, f"{partial}-wal", f"{partial}-shm", f"{partial}-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _copy_into(source: sqlite3.Connection, target_path: Path, dest: Path, busy_timeout: float) -> None:
    try:
        target = sqlite3.connect(target_path, timeout=busy_timeout)
        try:
            # pages=-1: every page in one step, so the copy is a single committed state
            # even while other connections write (a stepwise copy would restart or tear).
            source.backup(target, pages=-1)
        finally:
            target.close()  # in WAL mode like the source; closing checkpoints and removes its WAL
    except sqlite3.Error as exc:
        raise translate(exc, dest, busy_timeout) from exc
