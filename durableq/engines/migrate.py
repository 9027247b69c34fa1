"""Schema migrations: alembic, run on the durableq file under a file lock.

``durableq.open`` calls :func:`ensure_schema`; the CLI's ``db`` commands call
:func:`upgrade`, :func:`current` and :func:`history`.  alembic is imported
only when a file actually needs migrating, so opening an up-to-date file
stays fast.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from ..errors import DatabaseError, DatabaseLocked, InvalidParameterValue, SchemaVersionTooNew
from .fileformat import SCHEMA_REVISION
from .files import configure_new, identify, use_wal
from .sqlite import Database, translate

if TYPE_CHECKING:
    from alembic.config import Config

# The package maps the repository's top-level migrations/ folder to durableq.migrations.
MIGRATIONS_DIR = Path(str(resources.files("durableq.migrations")))


@dataclass(frozen=True, slots=True)
class Revision:
    """One alembic revision, as ``db history`` shows it."""

    revision: str
    down_revision: str | None
    description: str
    is_head: bool


def alembic_config(db: Database) -> Config:
    """An alembic configuration whose migrations run on ``db``'s own connections."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["durableq_database"] = db
    return config


def _revision(conn: sqlite3.Connection) -> str | None:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    if not has_table:
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def current(db: Database) -> str | None:
    """The revision the file is at (``None`` for an empty file); refuses other applications' files."""
    try:
        identify(db.conn, db.path)
        return _revision(db.conn)
    except sqlite3.Error as exc:
        raise translate(exc, db.path, db.busy_timeout) from exc


def history(db: Database) -> list[Revision]:
    """Every revision this durableq knows, newest first."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config(db))
    heads = set(scripts.get_heads())
    return [
        Revision(
            revision=script.revision,
            down_revision=script.down_revision if isinstance(script.down_revision, str) else None,
            description=script.doc,
            is_head=script.revision in heads,
        )
        for script in scripts.walk_revisions()
    ]


def _check_known(db: Database, revision: str | None) -> None:
    if revision is None or revision == SCHEMA_REVISION:
        return
    known = {r.revision for r in history(db)}
    if revision not in known:
        raise SchemaVersionTooNew(
            f"{db.path} is at schema revision {revision!r}, written by a newer durableq; "
            f"this version knows up to {SCHEMA_REVISION!r}: upgrade durableq to open it"
        )


@contextmanager
def _translated(db: Database) -> Iterator[None]:
    """alembic runs its statements through SQLAlchemy: its driver errors get the same translation
    as every other statement's, and its own refusals (an unknown revision) become durableq errors."""
    from alembic.util import CommandError
    from sqlalchemy.exc import DBAPIError

    try:
        yield
    except DBAPIError as exc:
        if isinstance(exc.orig, sqlite3.Error):
            raise translate(exc.orig, db.path, db.busy_timeout) from exc
        raise DatabaseError(f"{db.path}: the migration failed: {exc.orig}") from exc
    except sqlite3.Error as exc:
        raise translate(exc, db.path, db.busy_timeout) from exc
    except CommandError as exc:
        known = ", ".join(r.revision for r in history(db))
        raise InvalidParameterValue(
            f"cannot migrate {db.path}: {exc}; known revisions: {known}, head, base"
        ) from exc


def upgrade(db: Database, target: str = "head") -> str | None:
    """Migrate the file to ``target`` under the file lock; returns the new revision."""
    from alembic import command

    with _migration_lock(db), _translated(db):
        conn = db.conn
        try:
            is_ours = identify(conn, db.path)
            _check_known(db, _revision(conn))
            use_wal(conn)
            if not is_ours:
                configure_new(conn)
        except sqlite3.Error as exc:
            raise translate(exc, db.path, db.busy_timeout) from exc
        command.upgrade(alembic_config(db), target)
    return current(db)


def downgrade(db: Database, target: str) -> str | None:
    """Migrate down to ``target`` (``"base"`` removes every table)."""
    from alembic import command

    with _migration_lock(db), _translated(db):
        current(db)  # refuses files that are not ours before alembic touches them
        command.downgrade(alembic_config(db), target)
    return current(db)


@contextmanager
def _migration_lock(db: Database) -> Iterator[None]:
    """Only one process migrates a file at a time (and a new file is created once)."""
    lock = FileLock(f"{db.path}.lock", mode=0o600)
    try:
        with lock.acquire(timeout=db.busy_timeout):
            yield
    except Timeout as exc:
        raise DatabaseLocked(
            f"another process held the migration lock {lock.lock_file} for more than {db.busy_timeout:g} s"
        ) from exc


def ensure_schema(db: Database) -> None:
    """Refuse files that are not ours or too new; migrate ours (or an empty file) to head."""
    try:
        conn = db.conn
        identify(conn, db.path)
        revision = _revision(conn)
    except sqlite3.Error as exc:
        raise translate(exc, db.path, db.busy_timeout) from exc
    if revision == SCHEMA_REVISION:
        return
    _check_known(db, revision)
    upgrade(db)
