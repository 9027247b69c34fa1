"""What every command shares: the root group that turns errors into one line and
an exit status, the CLI's names for the library's names in those lines, and
opening the broker (or a queue) the root options name (``--db``, ``--keyring``,
``--payload-dir``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

import durableq
from durableq.engines.location import require_file
from durableq.engines.urls import postgres_url
from durableq.text import printable

from . import placement

F = TypeVar("F", bound=Callable[..., Any])

#: The code of an error that is a bug in durableq (SQS's name for a server-side failure).
INTERNAL_FAILURE = "InternalFailure"
#: The code of a command stopped by Ctrl-C; its exit status is the shell's for SIGINT (128 + 2).
INTERRUPTED = "Interrupted"
INTERRUPTED_STATUS = 130


class CommandFailed(click.ClickException):
    """A refused operation: one ``error: CODE: message`` line on stderr, exit status 1.

    ``code`` is the library's error code when the library refused, else one of the
    few codes the command line adds (docs/cli.md, "Conventions").
    """

    exit_code = 1

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def show(self, file: Any = None) -> None:
        # One line, whatever the message repeats (a path, a name with a line break in it).
        click.echo(f"error: {self.code}: {printable(self.format_message())}", err=True)


class Interrupted(CommandFailed):
    """Ctrl-C (SIGINT) during a command: one line and exit status 130, as a shell expects of an
    interrupted program (click's own answer, ``Aborted!`` and status 1, reads as a refusal)."""

    exit_code = INTERRUPTED_STATUS

    def __init__(self) -> None:
        super().__init__(INTERRUPTED, "stopped by Ctrl-C (SIGINT)")


class DurableQGroup(click.Group):
    """The root group; its ``invoke`` runs every subcommand, so errors are handled here once.

    Usage errors stay click's (exit status 2); a durableq error becomes
    ``error: CODE: message`` (exit status 1); Ctrl-C, ``error: Interrupted: ...`` (exit status 130);
    nothing prints a traceback.  (The subcommand's context, and so the broker it opened, closes
    inside ``invoke``: a Ctrl-C while it closes is caught here too.)
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # The whole command line, for the hint of a misplaced option (click's parser consumes ``args``).
        given = ctx.meta[_ARGS] = tuple(args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            hint = placement.command_option_before(ctx, given, exc.option_name)
            if hint is None:
                raise
            raise hint from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:  # a command's, or a group's below the root (`queue --json list`)
            given, name = ctx.meta[_ARGS], exc.option_name
            hint = placement.global_option_after(ctx, given, name) or placement.command_option_before(
                ctx, given, name
            )
            if hint is None:
                raise
            raise hint from exc
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt as exc:
            raise Interrupted() from exc
        except durableq.DurableQError as exc:
            raise CommandFailed(exc.code, cli_words(exc)) from exc
        except UnicodeDecodeError as exc:  # a file or stdin given to a command
            raise CommandFailed(
                "InvalidParameterValue", f"the input is not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from exc
        except OSError as exc:  # a file given to a command could not be read or written
            where = f": {exc.filename}" if exc.filename else ""
            raise CommandFailed("InvalidParameterValue", f"{exc.strerror or exc}{where}") from exc
        except Exception as exc:  # a bug: still one line, but say so
            raise CommandFailed(
                INTERNAL_FAILURE,
                f"unexpected {type(exc).__name__}: {exc} (a bug in durableq; please report it)",
            ) from exc


# -- the CLI's words for the library's ----------------------------------------------

#: Library names that mean the same in every command.
COMMON_WORDS = {"fifo=True": "--fifo", "set_attributes": "`durableq queue set`"}


def cli_words(error: durableq.DurableQError, words: Mapping[str, str] | None = None) -> str:
    """``error``'s message with the library's names spelled as the user typed them.

    ``words`` maps a library name (``delay_seconds``) to the command's option
    (``--delay``); :data:`COMMON_WORDS` always apply.  The error says which of its
    words are library names (its fields: ``DurableQError.spelled``); a value the
    user gave is never respelled.
    """
    return error.spelled({**COMMON_WORDS, **(words or {})})


def speaks(**words: str) -> Callable[[F], F]:
    """Declare a command's option for each library name its errors may use.

    ``@speaks(delay_seconds="--delay")`` under ``@click.command()``: a durableq
    error the command raises says ``--delay must be ...``, not ``delay_seconds``.
    """

    def decorate(callback: F) -> F:
        @functools.wraps(callback)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return callback(*args, **kwargs)
            except durableq.DurableQError as exc:
                raise CommandFailed(exc.code, cli_words(exc, words)) from exc

        return run  # type: ignore[return-value]

    return decorate


@dataclass(frozen=True, slots=True)
class Settings:
    """The root options, kept in the click context for subcommands."""

    db: str  # a SQLite file's path, or a postgresql:// URL
    keyring: Path | None = None  # --keyring / $DURABLEQ_KEYRING: the master keys of encrypted queues
    payload_dir: Path | None = None  # --payload-dir / $DURABLEQ_PAYLOAD_DIR; None: the library's default
    schema: str | None = None  # --schema / $DURABLEQ_SCHEMA (PostgreSQL); None: the library's default


def settings() -> Settings:
    """The root options of this invocation."""
    found = click.get_current_context().find_object(Settings)
    assert found is not None  # the root group always sets it
    return found


def db_location() -> str:
    """The database of this invocation (``--db``, ``$DURABLEQ_DB`` or ``./durableq.db``): a file's
    path or a PostgreSQL URL."""
    return settings().db


def keyring_path() -> Path:
    """The keyring file (``--keyring`` or ``$DURABLEQ_KEYRING``), which the command cannot do without."""
    path = settings().keyring
    if path is None:
        raise CommandFailed(
            durableq.MissingParameter.code,
            "this command works on a keyring file: pass --keyring FILE (before the command) "
            "or set DURABLEQ_KEYRING",
        )
    return path


def _exists(location: str) -> bool:
    """Whether the database is there: a file that exists, or any PostgreSQL database (created by its
    server's administrator; durableq makes its tables)."""
    return bool(postgres_url(location)) or Path(location).exists()


def existing_db_location() -> str:
    """The database, which must exist if it is a file (for the commands that do not open a broker:
    ``db``, ``analyze``, ``export``); the library's rule, as ``open_broker`` has it."""
    location = db_location()
    require_file(location)
    return location


def open_broker(*, create: bool = False) -> durableq.Broker:
    """Open the database, once per command (closed when the command ends).

    Only ``create`` makes or migrates a database (`init`, `queue create`, `send`, `serve`); any
    other command refuses a missing or empty one, or one at an older schema revision, and leaves
    it as it was (``durableq.open``'s ``create=False``).
    """
    ctx = click.get_current_context()
    opened = ctx.meta.get(_BROKER)
    if isinstance(opened, durableq.Broker):
        return opened
    given = settings()
    # The library never reads the environment: the keyring and the payload store come from here.
    broker = ctx.with_resource(
        durableq.open(
            db_location(),
            keyring=given.keyring,
            payload_dir=given.payload_dir,
            schema=given.schema,
            create=create,
        )
    )
    ctx.meta[_BROKER] = broker
    return broker


_BROKER = "durableq.broker"
_ARGS = "durableq.args"


def management(action: str, queue: str | None = None, *, create: bool = False) -> Callable[[F], F]:
    """Declare a command that makes the management call ``action`` on the queue its parameter
    ``queue`` names (docs/concepts.md, "Audit trail").

    The command looks the queue up and reads its options before the library's call; a refusal
    there (no such queue) is recorded in the audit trail as the call's, as the library records
    its own (``Broker.management_call``).  Put it right above the function, under ``@speaks``;
    ``create``: the command may create or migrate the database (``open_broker``).
    """

    def decorate(callback: F) -> F:
        @functools.wraps(callback)
        def run(*args: Any, **kwargs: Any) -> Any:
            if not _exists(db_location()):  # no file to record in: the command says so, or creates it
                return callback(*args, **kwargs)
            name = kwargs.get(queue) if queue is not None else None
            with open_broker(create=create).management_call(action, name):
                return callback(*args, **kwargs)

        return run  # type: ignore[return-value]

    return decorate


def open_queue(name: str, *, create: bool = False) -> durableq.Queue:
    """The queue called ``name`` in the database; QueueDoesNotExist if there is none."""
    return open_broker(create=create).get_queue(name)


#: The code of the last line when some entries of a command failed (each is listed above it).
ENTRIES_FAILED = "EntriesFailed"


def fail_entries(failed: list[tuple[str, str, str]], total: int, what: str) -> None:
    """After the result is printed: list the entries that failed on stderr, then exit 1.

    ``failed`` holds ``(where, code, message)``; nothing happens when it is empty.
    """
    if failed:
        lines = (f"{printable(where)}: {code}: {printable(message)}" for where, code, message in failed)
        click.echo("\n".join(lines), err=True)
        raise CommandFailed(ENTRIES_FAILED, f"{len(failed)} of {total} {what} failed")
