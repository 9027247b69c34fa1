"""The database file: ``durableq init`` and the schema migration commands ``durableq db ...``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

import durableq
from durableq import limits
from durableq.engines import migrate
from durableq.engines.base import Database
from durableq.engines.location import open_database
from durableq.engines.urls import postgres_url, redacted

from .base import db_location, existing_db_location, open_broker, settings
from .output import emit, json_option, table

#: The REVISION of `db upgrade` that means the latest one.
HEAD = "head"


@contextmanager
def _database(location: str) -> Iterator[Database]:
    """The database as the migration functions take it, closed afterwards."""
    # The schema checked as durableq.open checks it (a bad name, or one given with a SQLite file).
    schema = durableq.OpenOptions(location, schema=settings().schema).schema
    database = open_database(
        location, limits.DEFAULT_DURABILITY, limits.DEFAULT_BUSY_TIMEOUT, create=False, schema=schema
    )
    try:
        yield database
    finally:
        database.close()


def _head() -> str:
    with _database(db_location()) as database:  # history reads the migration scripts, not the file
        return next(r.revision for r in migrate.history(database) if r.is_head)


@click.command()
@json_option
def init(as_json: bool) -> None:
    """Create the database file (if there is none) and migrate it to the latest schema.

    \b
      durableq --db /var/lib/app/queue.db init
    """
    location = db_location()
    if postgres_url(location):
        with _database(location) as database:
            created = migrate.current(database) is None  # the tables, not the database itself
    else:
        created = not Path(location).exists()
    durableq.open(location, schema=settings().schema).close()
    with _database(location) as database:
        revision = migrate.current(database)
    shown = redacted(location)
    text = f"{'created' if created else 'ready:'} {shown} (schema revision {revision})"
    emit(as_json, {"path": shown, "created": created, "revision": revision}, text)


@click.group("db")
def db_group() -> None:
    """Schema migrations of the database file (alembic)."""


@db_group.command()
@click.argument("revision", default=HEAD)
@json_option
def upgrade(revision: str, as_json: bool) -> None:
    """Migrate the database file to REVISION (default: the latest, head).

    \b
      durableq db upgrade
    """
    with _database(existing_db_location()) as database:
        known = [r.revision for r in migrate.history(database)]  # newest first
        if revision not in (HEAD, *known):
            raise durableq.InvalidParameterValue(
                f"unknown schema revision {revision!r}; REVISION is {HEAD} or one of "
                f"{', '.join(known)} (`durableq db history` lists them)"
            )
        before = migrate.current(database)
        after = migrate.upgrade(database, revision)
    if before == after:
        newer = revision not in (HEAD, after)
        text = f"already at {after}" + (
            f", which is newer than {revision} (upgrade never goes back)" if newer else ""
        )
    else:
        text = f"upgraded from {before or 'nothing'} to {after}"
    emit(as_json, {"from": before, "to": after}, text)


@db_group.command()
@click.argument("revision")
@json_option
def downgrade(revision: str, as_json: bool) -> None:
    """Migrate the database back to REVISION (`base`: remove every table of durableq's, and only
    those: an application's tables in the same database stay).

    Below 0009, the database goes back where an older durableq finds it (its tables unprefixed; on
    PostgreSQL in public). Messages of tables a revision drops are lost.

    
      durableq db downgrade 0008
    """
    with _database(existing_db_location()) as database:
        known = [r.revision for r in migrate.history(database)]
        if revision not in ("base", *known):
            raise durableq.InvalidParameterValue(
                f"unknown schema revision {revision!r}; REVISION is base or one of "
                f"{', '.join(known)} (`durableq db history` lists them)"
            )
        before = migrate.current(database)
        after = migrate.downgrade(database, revision)
    text = (
        f"already at {after or 'base'}"
        if before == after
        else f"downgraded from {before} to {after or 'base'}"
    )
    emit(as_json, {"from": before, "to": after}, text)


@db_group.command()
@json_option
def current(as_json: bool) -> None:
    """Show the schema revision of the database file.

    \b
      durableq db current
    """
    with _database(existing_db_location()) as database:
        revision = migrate.current(database)
    head = _head()
    state = "not migrated" if revision is None else ("head" if revision == head else f"head is {head}")
    emit(as_json, {"revision": revision, "head": head}, f"{revision or '-'} ({state})")


@db_group.command()
@json_option
def history(as_json: bool) -> None:
    """List the schema revisions this durableq knows, newest first (needs no database file)."""
    with _database(db_location()) as database:
        revisions = migrate.history(database)
    headers = ("revision", "down revision", "head", "description")
    rows = [(r.revision, r.down_revision, "head" if r.is_head else "", r.description) for r in revisions]
    emit(as_json, revisions, lambda: table(headers, rows))


@click.command()
@click.argument("dest", type=click.Path(dir_okay=False, path_type=Path))
@json_option
def backup(dest: Path, as_json: bool) -> None:
    """Copy the database into the new file DEST, safely while it is in use.

    SQLite's online backup: the copy is one consistent state that includes
    what is still in the -wal file (copying the file itself would miss it),
    and producers and consumers go on meanwhile. DEST must not exist.

    \b
      durableq backup /backups/queue-$(date +%F).db
    """
    written = open_broker().backup(dest)
    size = written.stat().st_size
    source = redacted(db_location())  # as the user named it (the broker's location is absolute)
    text = f"backed up {source} to {written} ({size:,} bytes)"
    emit(as_json, {"source": source, "backup": written, "bytes": size}, text)


COMMANDS = [init, db_group, backup]
