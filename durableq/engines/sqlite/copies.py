"""Copies of a SQLite file taken while it is in use: ``backup()``'s, and the snapshot the analytics
read (:class:`FileCopy`).

SQLite's online backup API copies every page in one step inside one read transaction of the source,
so a copy is one committed state, whatever writers do meanwhile; and it is settled (one writer at a
time: no event at or below its highest id is still to commit)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ... import limits
from ...errors import DatabaseError, InvalidParameterValue, NotADurableQDatabase
from .. import forks
from ..dialect import SQLITE
from ..fileformat import check_readable
from ..files import fsync_path, identify, read_revision
from .connection import SqliteConnection
from .errors import translate

log = logging.getLogger(__name__)

#: The name of the analytics' copy in its folder.
_SNAPSHOT_NAME = "snapshot.db"


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


class FileCopy:
    """A copy of a durableq file for readers (see :meth:`..base.Database.export_snapshot`), taken at
    ``now_ms`` (the clock after the copy ended).  Read only; its folder is removed by :meth:`close`,
    or at the latest when the object is collected or the interpreter exits."""

    dialect = SQLITE

    def __init__(self, source: Path, file: Path, now_ms: int, busy_timeout: float) -> None:
        self.source: Path = source
        self.file: Path = file
        self.location = str(file)
        self.now_ms = now_ms
        self._busy_timeout = busy_timeout
        self._remove = weakref.finalize(self, shutil.rmtree, file.parent, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return not self._remove.alive

    def close(self) -> None:
        """Remove the copy (and its folder)."""
        self._remove()

    def query(self, sql: str, parameters: Mapping[str, object] | None = None) -> list[tuple[Any, ...]]:
        try:
            with closing(sqlite3.connect(f"file:{quote(str(self.file))}?mode=ro", uri=True)) as conn:
                return conn.execute(sql, parameters or {}).fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, self.source, self._busy_timeout) from exc

    def jdbc(self) -> tuple[str, dict[str, str]]:
        # SQLITE_OPEN_READONLY: the copy is never written.
        return f"jdbc:sqlite:{self.file}", {"open_mode": "1"}


def copy_for_readers(
    source: Path, clock: Callable[[], float], directory: str | os.PathLike[str] | None, busy_timeout: float
) -> FileCopy:
    """Copy ``source`` into a new folder under ``directory`` (default: the system temp folder).

    Without ``directory`` the folder is private to this OS user (0700).  In a
    given ``directory`` -- storage that executors running as other OS users
    read -- the folder is :data:`~durableq.limits.SNAPSHOT_SHARED_DIR_MODE`
    (others may open the copy by its name, not list the folder), so who can
    read the copy is decided by the permissions of ``directory`` itself.  The
    copy is :data:`~durableq.limits.SNAPSHOT_FILE_MODE` (read-only) either way.
    """
    if not source.is_file():
        # Checked first: opening a missing file through SQLite would create it.
        raise DatabaseError(f"{source} does not exist or is not a file; give the path of a durableq database")
    folder = Path(tempfile.mkdtemp(prefix="durableq-snapshot-", dir=directory))
    try:
        if directory is not None:
            folder.chmod(limits.SNAPSHOT_SHARED_DIR_MODE)
        path = folder / _SNAPSHOT_NAME
        _copy_whole(source, path, busy_timeout)
        # The clock is read after the copy: every message in it was written before "now".
        now_ms = int(clock() * 1000)
        _check(source, path, busy_timeout)
        # Read-only: no reader can change the copy (or leave a journal beside it).
        path.chmod(limits.SNAPSHOT_FILE_MODE)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    log.debug("snapshot of %s at %s: %s", source, now_ms, path)
    return FileCopy(source, path, now_ms, busy_timeout)


def _copy_whole(source: Path, target: Path, busy_timeout: float) -> None:
    uri = f"file:{quote(str(source.resolve()))}?mode=ro"
    try:
        src = sqlite3.connect(uri, uri=True, timeout=busy_timeout)
        dst = sqlite3.connect(target)
        try:
            # pages=-1 copies every page in one step, inside one read transaction
            # of the source: the copy is one committed state, whatever writers do.
            src.backup(dst, pages=-1)
            # The copy inherits WAL mode; a plain journal keeps it one self-contained file.
            dst.execute("PRAGMA journal_mode = DELETE")
        finally:
            dst.close()
            src.close()
    except sqlite3.Error as exc:
        raise translate(exc, source, busy_timeout) from exc


def _check(source: Path, path: Path, busy_timeout: float) -> None:
    """Refuse a copy that is not a durableq file at this schema."""
    try:
        with closing(sqlite3.connect(path, timeout=busy_timeout)) as conn:
            if not identify(conn, source):
                raise NotADurableQDatabase(
                    f"{source} holds no durableq tables (an empty file, or only another application's)"
                )
            revision = read_revision(conn)
    except sqlite3.Error as exc:
        raise translate(exc, source, busy_timeout) from exc
    check_readable(str(source), revision)
