"""The database file itself: created private, checked to be SQLite (and ours) before use, set to WAL.

Kept apart from the connector (``sqlite.py``) because it is about the file,
not about connections: nothing here holds a connection open.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import (
    DatabaseCorrupt,
    DatabaseError,
    DatabaseReadOnly,
    InvalidParameterValue,
    NotADurableQDatabase,
)
from .fileformat import APPLICATION_ID, LEGACY_VERSION_TABLE, PREFIX, PREFIXED_REVISION, VERSION_TABLE

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
    """True if ``conn``'s file holds durableq's tables (of any revision), False if none yet: a new file,
    or an application's that durableq may share; else raise.

    durableq shares a file with an application's tables (its own names all begin with
    :data:`.fileformat.PREFIX`, since revision 0009), and knows its tables by its version table
    (before 0009, by its application id and alembic's default version table: the file was its alone).
    A file that holds durableq's names without durableq's version table is refused: durableq did not
    make them, and would take them for its own.
    """
    (application_id,) = conn.execute("PRAGMA application_id").fetchone()
    names = [row[0] for row in conn.execute(_OWN_NAMES)]
    if VERSION_TABLE in names or application_id == APPLICATION_ID:
        return True
    if names:
        raise NotADurableQDatabase(
            f"{path} holds {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}, which durableq did "
            f"not make (the file has no {VERSION_TABLE}); durableq names its tables and indexes "
            f"{PREFIX}…, and shares a file with an application whose names are all other ones"
        )
    return False


# Every name of the file that is durableq's kind of name (LIKE would take "_" for any letter).
_OWN_NAMES = f"SELECT name FROM sqlite_master WHERE substr(name, 1, {len(PREFIX)}) = '{PREFIX}' ORDER BY name"


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def _version_table(conn: sqlite3.Connection) -> str | None:
    """The table that holds the file's revision: :data:`.fileformat.VERSION_TABLE`, or in a file of
    durableq's alone before revision 0009, alembic's default one; None: neither."""
    if _has_table(conn, VERSION_TABLE):
        return VERSION_TABLE
    (application_id,) = conn.execute("PRAGMA application_id").fetchone()
    if application_id == APPLICATION_ID and _has_table(conn, LEGACY_VERSION_TABLE):
        return LEGACY_VERSION_TABLE
    return None


def read_revision(conn: sqlite3.Connection) -> str | None:
    """The alembic revision a durableq file (see :func:`identify`) is at; None before its first migration."""
    table = _version_table(conn)
    if table is None:
        return None
    row = conn.execute(f"SELECT version_num FROM {table}").fetchone()
    return row[0] if row else None


def configure_new(conn: sqlite3.Connection) -> None:
    """Settings stored in a new file: durableq's application id, in a file that holds nothing yet (an
    application's file keeps its own, 0 included)."""
    (tables,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    (application_id,) = conn.execute("PRAGMA application_id").fetchone()
    if tables == 0 and application_id == 0:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def adopt_legacy_version(conn: sqlite3.Connection) -> None:
    """Before alembic runs: the revision of a file before 0009 into :data:`.fileformat.VERSION_TABLE`
    (alembic stamps the table it is configured with)."""
    if _version_table(conn) == LEGACY_VERSION_TABLE:
        with _write(conn):
            conn.execute(f"ALTER TABLE {LEGACY_VERSION_TABLE} RENAME TO {VERSION_TABLE}")


def after_downgrade(conn: sqlite3.Connection, revision: str | None) -> None:
    """After a downgrade to ``revision``: at base, durableq's version table goes too (nothing of
    durableq's is left in a shared file); below 0009, in a file of durableq's own, the revision goes
    back where the durableq of that revision reads it."""
    if not _has_table(conn, VERSION_TABLE):
        return
    with _write(conn):
        if revision is None:
            conn.execute(f"DROP TABLE {VERSION_TABLE}")
        elif revision < PREFIXED_REVISION and _version_table(conn) == VERSION_TABLE:
            (application_id,) = conn.execute("PRAGMA application_id").fetchone()
            if application_id == APPLICATION_ID and not _has_table(conn, LEGACY_VERSION_TABLE):
                conn.execute(f"ALTER TABLE {VERSION_TABLE} RENAME TO {LEGACY_VERSION_TABLE}")


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
