"""Schema migrations: alembic, run on the database under its engine's migration lock (a lock
file beside a SQLite file; an advisory lock on PostgreSQL).

``durableq.open`` calls :func:`ensure_schema`; the CLI's ``db`` commands call
:func:`upgrade`, :func:`current` and :func:`history`.  alembic is imported
only when a file actually needs migrating, so opening an up-to-date file
stays fast.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DatabaseError, InvalidParameterValue, NotADurableQDatabase, SchemaVersionTooNew
from .base import Database
from .fileformat import HOW_TO_CREATE, SCHEMA_REVISION

if TYPE_CHECKING:
    from alembic.config import Config

# The package maps the repository's top-level migrations/ folder to durableq.migrations.
MIGRATIONS_DIR = Path(str(resources.files("durableq.migrations")))


@contextmanager
def _alembic_quiet() -> Iterator[None]:
    """alembic's INFO lines (its plugins set up on import, "Context impl", "Running upgrade") are
    not the application's business: an application's ``logging.basicConfig(level=INFO)`` would
    print a dozen before its first job.  They show when alembic's own logger is given a level."""
    alembic = logging.getLogger("alembic")
    if alembic.level != logging.NOTSET:  # someone asked for alembic's lines (or silenced them)
        yield
        return
    alembic.setLevel(logging.WARNING)
    try:
        yield
    finally:
        alembic.setLevel(logging.NOTSET)


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


def current(db: Database) -> str | None:
    """The revision the database is at (``None`` for an empty one); refuses other applications' files."""
    return db.revision()


def history(db: Database) -> list[Revision]:
    """Every revision this durableq knows, newest first."""
    with _alembic_quiet():
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
            f"{db.name} is at schema revision {revision!r}, written by a newer durableq; "
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
        if isinstance(exc.orig, Exception) and db.is_driver_error(exc.orig):
            raise db.translated(exc.orig) from exc
        raise DatabaseError(f"{db.name}: the migration failed: {exc.orig}") from exc
    except CommandError as exc:
        known = ", ".join(r.revision for r in history(db))
        raise InvalidParameterValue(
            f"cannot migrate {db.name}: {exc}; known revisions: {known}, head, base"
        ) from exc


def upgrade(db: Database, target: str = "head") -> str | None:
    """Migrate the file to ``target`` under the file lock; returns the new revision."""
    with _alembic_quiet():
        from alembic import command

    with db.migration_lock(), _translated(db), _alembic_quiet():
        _check_known(db, db.revision())
        db.prepare_migration(target)
        command.upgrade(alembic_config(db), target)
    return current(db)


def downgrade(db: Database, target: str) -> str | None:
    """Migrate down to ``target`` (``"base"`` removes every table of durableq's, and only those)."""
    with _alembic_quiet():
        from alembic import command

    with db.migration_lock(), _translated(db), _alembic_quiet():
        current(db)  # refuses files that are not ours before alembic touches them
        db.prepare_migration(target)  # a database left below 0009 by an older durableq: where alembic looks
        if not (target == "base" and db.drop_all()):
            command.downgrade(alembic_config(db), target)
            db.after_downgrade(current(db))
    return current(db)


def require_schema(db: Database) -> None:
    """Refuse, writing nothing, a database that is not a durableq database at this version's schema:
    an empty one (NotADurableQDatabase), one of another application or too new (as
    :func:`ensure_schema`), one at an older revision (DatabaseError: ``durableq db upgrade``
    migrates it).  The rule of an open that may not create or migrate."""
    revision = db.revision()
    if revision == SCHEMA_REVISION:
        return
    if revision is None:
        empty = "an empty file" if db.path is not None else "a database without durableq's tables"
        raise NotADurableQDatabase(f"{db.name} is {empty}, not a durableq database: {HOW_TO_CREATE}")
    _check_known(db, revision)
    raise DatabaseError(
        f"{db.name} is at schema revision {revision!r}, older than this durableq's {SCHEMA_REVISION!r}: "
        "migrate it with durableq db upgrade"
    )


def ensure_schema(db: Database) -> None:
    """Refuse databases that are not ours or too new; migrate ours (or an empty one) to head."""
    revision = db.revision()
    if revision == SCHEMA_REVISION:
        return
    _check_known(db, revision)
    upgrade(db)
