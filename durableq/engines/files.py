"""The database file itself: created private, checked to be SQLite (and ours) before use, set to WAL.

Kept apart from the connector (``sqlite.py``) because it is about the file,
not about connections: nothing here holds a connection open.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import (
    DatabaseCorrupt,
    DatabaseError,
    DatabaseReadOnly,
    InvalidParameterValue,
    NotADurableQDatabase,
)
from .fileformat import APPLICATION_ID

_MIN_PAGE_SIZE = 512


def prepare_file(path: Path, file_mode: int) -> None:
    """Create ``path`` readable by its owner only, or check that the existing file may be SQLite.

    An existing file is never opened here, only ``stat``-ed: closing any file
    descriptor of a database file drops every POSIX lock this process holds on
    it, so another broker of this process would lose its locks and another
    process could then delete the WAL under it.  SQLite itself reads the header
    later (``identify``), and writes nothing to a file that is not a database.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, file_mode)
    except FileExistsError:
        pass
    except PermissionError as exc:
        raise DatabaseReadOnly(
            f"cannot create {path}: {exc.strerror}; check the directory permissions"
        ) from exc
    except FileNotFoundError as exc:
        raise DatabaseError(f"cannot create {path}: the directory does not exist") from exc
    except (ValueError, UnicodeEncodeError) as exc:  # a NUL byte, or text no file system name can hold
        raise InvalidParameterValue(f"path {str(path)[:200]!r} is not a usable file name: {exc}") from None
    except OSError as exc:
        raise DatabaseError(f"cannot create {path}: {exc.strerror or exc}") from exc
    else:
        os.close(fd)  # a file nobody can have open yet
        return
    check_existing(path)


def check_existing(path: Path) -> None:
    """Check, by ``stat`` alone, that the existing ``path`` may be an SQLite file (:func:`prepare_file`)."""
    if path.is_dir():
        raise DatabaseError(f"{path} is a directory; give the path of a database file")
    size = path.stat().st_size
    # SQLite would take a file shorter than one page for an empty database and write over it.
    if 0 < size < _MIN_PAGE_SIZE:
        raise DatabaseCorrupt(f"{path} is not an SQLite database ({size} bytes); it was left untouched")


def identify(conn: sqlite3.Connection, path: Path) -> bool:
    """True if ``conn`` holds a durableq database, False if it is empty; else raise."""
    (application_id,) = conn.execute("PRAGMA application_id").fetchone()
    if application_id == APPLICATION_ID:
        return True
    (tables,) = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchone()
    if application_id == 0 and tables == 0:
        return False
    raise NotADurableQDatabase(
        f"{path} is an SQLite database of another application (application_id "
        f"{application_id:#x}, {tables} tables); durableq leaves it untouched"
    )


def read_revision(conn: sqlite3.Connection) -> str | None:
    """The alembic revision a durableq file (see :func:`identify`) is at; None before its first migration."""
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    if not has_table:
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def configure_new(conn: sqlite3.Connection) -> None:
    """Settings stored in a new file (inside the creating transaction where SQLite allows)."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def use_wal(conn: sqlite3.Connection) -> None:
    """WAL lets readers run beside the one writer; the mode is stored in the file."""
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode.lower() != "wal":
        raise DatabaseError(f"could not switch the database to WAL mode (it is in {mode} mode)")


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or folder by name (a folder, so that a rename or a new entry in it is durable).

    Never on a database file in use: closing the descriptor would drop this process's POSIX locks on it.
    """
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
