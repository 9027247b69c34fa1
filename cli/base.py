"""What every command shares: the root group that turns errors into one line and
an exit status, and opening the broker (or a queue) the ``--db`` option names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

import durableq


class CommandFailed(click.ClickException):
    """A refused operation: printed as one ``error: ...`` line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class DurableQGroup(click.Group):
    """The root group; its ``invoke`` runs every subcommand, so errors are handled here once.

    Usage errors stay click's (exit status 2); a durableq error becomes
    ``error: CODE: message`` (exit status 1); nothing prints a traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except durableq.DurableQError as exc:
            raise CommandFailed(f"{exc.code}: {exc.message}") from exc
        except UnicodeDecodeError as exc:  # a file or stdin given to a command
            raise CommandFailed(f"the input is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        except OSError as exc:  # a file given to a command could not be read or written
            where = f": {exc.filename}" if exc.filename else ""
            raise CommandFailed(f"{exc.strerror or exc}{where}") from exc
        except Exception as exc:  # a bug: still one line, but say so
            raise CommandFailed(
                f"unexpected {type(exc).__name__}: {exc} (a bug in durableq; please report it)"
            ) from exc


@dataclass(frozen=True, slots=True)
class Settings:
    """The root options, kept in the click context for subcommands."""

    db: Path


def db_path() -> Path:
    """The database file of this invocation (``--db``, ``$DURABLEQ_DB`` or ``./durableq.db``)."""
    return click.get_current_context().find_object(Settings).db  # type: ignore[union-attr]


def existing_db_path() -> Path:
    """The database file, which must exist: only a few commands may create one."""
    path = db_path()
    if not path.exists():
        raise CommandFailed(f"no durableq database at {path}; run `durableq init` or pass --db")
    return path


def open_broker(*, create: bool = False) -> durableq.Broker:
    """Open the database (closed when the command ends); ``create`` allows a new file."""
    path = db_path() if create else existing_db_path()
    return click.get_current_context().with_resource(durableq.open(path))


def open_queue(name: str, *, create: bool = False) -> durableq.Queue:
    """The queue called ``name`` in the database; QueueDoesNotExist if there is none."""
    return open_broker(create=create).get_queue(name)


def fail_entries(failed: list[tuple[str, str, str]], total: int, what: str) -> None:
    """After the result is printed: list the entries that failed on stderr, then exit 1.

    ``failed`` holds ``(where, code, message)``; nothing happens when it is empty.
    """
    if failed:
        click.echo("\n".join(f"{where}: {code}: {message}" for where, code, message in failed), err=True)
        raise CommandFailed(f"{len(failed)} of {total} {what} failed")
