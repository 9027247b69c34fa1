"""``open`` and ``Broker``: one durableq database (a SQLite file or a PostgreSQL database) and the
queues in it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from . import limits, queue_settings, validation
from . import transaction as transactions
from .engines.base import Database
from .engines.location import file_of, open_database, require_file
from .engines.migrate import ensure_schema, require_schema
from .errors import DurableQError, InvalidParameterValue
from .keyring import Keyring
from .limits import DEFAULT, _Default
from .ops import audit, broker_calls, payload_folder
from .ops.deletion import DELETE_QUEUE
from .ops.runtime import Runtime
from .options import OpenOptions
from .queue import Queue
from .schedules.calls import ScheduleCalls
from .temporary import TemporaryQueue
from .transaction import Transaction
from .types import AuditEvent, MessageEvent, MoveTask, RedriveAllowPolicy, RedrivePolicy

log = logging.getLogger(__name__)


def open(
    path: str | os.PathLike[str],
    *,
    clock: Callable[[], float] | None = None,
    durability: str = limits.DEFAULT_DURABILITY,
    busy_timeout: float = limits.DEFAULT_BUSY_TIMEOUT,
    payload_dir: str | os.PathLike[str] | None = None,
    keyring: str | os.PathLike[str] | Keyring | None = None,
    schema: str | None = None,
    create: bool = True,
) -> Broker:
    """Open (creating and migrating if needed) the durableq database at ``path``: a SQLite file, or a
    PostgreSQL database named by a ``postgresql://user:password@host:port/dbname`` URL (the
    ``postgres`` extra; the database must exist, durableq creates and migrates its tables).

    ``clock`` returns seconds since the epoch (default ``time.time``); tests
    pass a fake one.  ``durability="full"`` makes every commit durable before it
    returns (SQLite: fsync; PostgreSQL: ``synchronous_commit=on``), so a returned
    send survives power loss; ``"normal"`` survives a crash of the process (on
    PostgreSQL a crash of the server may lose the last moments of commits).
    ``busy_timeout`` bounds how long a call waits for another writer (a lock).
    ``payload_dir`` is the payload store of queues with large payloads (default:
    the folder ``PATH.payloads`` beside a SQLite file; on PostgreSQL there is no
    default: give a folder every host shares); an existing one must be a folder
    (not a link) of this user with mode 700, and not hold the database.
    ``keyring`` is the keyring file (or a :class:`~durableq.keyring.Keyring`) with
    the master keys of encrypted queues; it must exist (``KmsNotFound``: make one
    with ``durableq keys create`` or ``Keyring.create``) and be usable
    (``KmsAccessDenied``).  Without one, encrypted queues can be neither sent to
    nor received from (``KmsAccessDenied``), though stats, peek metadata and
    moves between queues of the same key still work.
    ``schema`` (PostgreSQL only) is the schema durableq's tables live in (default
    ``durableq``, created if missing): two schemas of one database are two
    independent durableq installations.  A SQLite file may hold the application's
    own tables too: durableq's are all named ``durableq_…``.
    The broker keeps all of this as :attr:`Broker.options`.
    ``create=False`` opens only a durableq database at this version's schema and writes nothing
    before that: a missing or empty file, or a PostgreSQL database without durableq's tables, is
    ``NotADurableQDatabase``; one at an older schema revision is ``DatabaseError`` (migrate it with
    ``durableq db upgrade``, or open it with ``create=True``).  For tools that only read or use a
    database, as the CLI's commands other than ``init``, ``queue create``, ``send`` and ``serve``.
    """
    return reopen(
        OpenOptions(
            path,
            durability=durability,
            busy_timeout=busy_timeout,
            keyring=keyring,
            payload_dir=payload_dir,
            clock=clock,
            schema=schema,
        ),
        create=create,
    )


def reopen(options: OpenOptions, *, create: bool = True) -> Broker:
    """Open a broker as ``options`` say: another broker's :attr:`Broker.options` open the same
    database with the same durability, busy timeout, keyring, payload store and clock (a worker
    process opens its database so).  ``create``: as :func:`open`'s."""
    if not isinstance(options, OpenOptions):
        raise InvalidParameterValue(
            f"options must be a durableq.OpenOptions (a broker's .options); got {type(options).__name__}"
        )
    location = options.location
    # Checked before the file is made: a folder that is not private, or holds the database, is refused.
    payloads = payload_folder.location(options.payload_dir, file_of(location))
    if options.keyring is not None:
        options.keyring.check()  # one that does not exist (or is unusable) is an error here, never made later
    if not create:
        require_file(location)
    db = open_database(
        location, options.durability, options.busy_timeout, create=create, schema=options.schema
    )
    try:
        if create:
            ensure_schema(db)
        else:
            require_schema(db)
    except BaseException:
        db.close()
        raise
    return Broker(Runtime(db, options, payloads))


class Broker(ScheduleCalls):
    """An open durableq database.  Thread-safe; each thread uses its own connection.  Its schedule
    calls (``create_schedule`` and the others, ``fire_due_schedules``) live in
    ``durableq/schedules/calls.py``."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    @property
    def _audit_target(self) -> tuple[Database, Callable[[], int]]:
        return self._rt.db, self._rt.now_ms

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for a PostgreSQL database: see :attr:`location`)."""
        return self._rt.db.path

    @property
    def location(self) -> str:
        """What :func:`durableq.open` was given: the file's path, or the PostgreSQL URL."""
        return self._rt.db.location

    @property
    def durability(self) -> str:
        return self._rt.db.durability

    @property
    def options(self) -> OpenOptions:
        """How this broker was opened (:func:`reopen` opens another the same way)."""
        return self._rt.options

    @property
    def keyring(self) -> Keyring | None:
        """The keyring this broker encrypts and decrypts with (None: it was opened without one)."""
        return self._rt.sealer.keyring

    @property
    def payload_dir(self) -> Path | None:
        """The payload store's folder (it exists once a large payload was stored)."""
        return self._rt.payloads.root

    def sweep_payloads(self, grace: float = limits.PAYLOAD_ORPHAN_GRACE) -> int:
        """Remove the payload files no message names any more: those of removed messages, and those
        older than ``grace`` seconds that no message ever named (a send cut by a crash between writing
        its payload and committing its row).  Brokers do this on their own; returns how many went."""
        validation.number("grace", grace, 0, limits.MAX_RETENTION_PERIOD)
        return self._rt.payloads.reclaim() + self._rt.payloads.sweep_orphans(grace)

    def __repr__(self) -> str:
        return f"<durableq.Broker {self._rt.db.name!r} durability={self.durability!r}>"

    def transaction(self, connection: object = None) -> AbstractContextManager[Transaction]:
        """A transaction that the queues' message calls join (``transaction=tx``): what they do commits,
        or rolls back, with the application's own writes, in one commit.

        Without ``connection``: a write transaction on durableq's own connection; ``tx.execute(sql,
        parameters)`` runs the application's statements in it; leaving the block commits (at the
        broker's durability), an exception rolls it back and is raised.  With ``connection``: the
        application's own connection to the same database (a ``sqlite3.Connection``, a
        ``psycopg.Connection``, a SQLAlchemy ``Connection`` or ORM ``Session``), in whose transaction
        durableq's statements run; the application commits or rolls back as it always does, and
        durableq commits nothing.  A connection to another database raises ``InvalidParameterValue``.
        """
        return transactions.begin(self._rt, connection)

    def __enter__(self) -> Broker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop this broker's move-task runners, delete the temporary queues it holds, write its
        pending counters, close its connections."""
        for name in self._rt.temporary_queues.held():
            try:
                self._rt.temporary_queues.end(name)
            except DurableQError:  # the file refuses (locked, full): the queue is reaped when idle
                log.warning("could not delete temporary queue %s on close", name, exc_info=True)
        self._rt.close()

    def backup(self, dest: str | os.PathLike[str]) -> Path:
        """Copy the database, while it is in use, into the new file ``dest``; returns its path.

        The copy is consistent (one committed state, including what is still
        in the ``-wal`` file, which copying the file itself would miss) and
        writers go on meanwhile.  ``dest`` must not exist; it is created
        readable by its owner only.  Open the copy with :func:`durableq.open`.
        """
        if not isinstance(dest, (str, os.PathLike)):
            raise InvalidParameterValue(f"dest must be a file path; got {type(dest).__name__}")
        target = Path(dest)
        self._rt.counters.flush()  # this process's latest counts belong in the copy too
        self._rt.db.backup(target, limits.DEFAULT_FILE_MODE)
        return target

    # -- queues -----------------------------------------------------------------

    @audit.audited("CreateQueue", lambda self, name=None, *args, **kwargs: name)
    def create_queue(
        self,
        /,
        name: str,
        *,
        fifo: bool = False,
        visibility_timeout: int | _Default = DEFAULT,
        delay_seconds: int | _Default = DEFAULT,
        retention_period: int | _Default = DEFAULT,
        receive_wait_time: int | _Default = DEFAULT,
        maximum_message_size: int | _Default = DEFAULT,
        content_based_deduplication: bool | _Default = DEFAULT,
        deduplication_scope: str | _Default = DEFAULT,
        redrive_policy: RedrivePolicy | _Default | None = DEFAULT,
        redrive_allow_policy: RedriveAllowPolicy | _Default | None = DEFAULT,
        history: bool | _Default = DEFAULT,
        history_retention: int | _Default = DEFAULT,
        large_payloads: bool | _Default = DEFAULT,
        kms_master_key_id: str | _Default | None = DEFAULT,
        sqs_managed_sse_enabled: bool | _Default = DEFAULT,
        kms_data_key_reuse_period: int | _Default = DEFAULT,
        tags: Mapping[str, str] | None = None,
        **sqs_settings: Any,
    ) -> Queue:
        """Create a queue, or return the existing one if the settings given are the ones it has.

        Defaults (``durableq.limits``): visibility timeout 30 s, no delay, 4 days of
        retention, no long polling, 1 MiB messages; FIFO queues deduplicate by
        queue scope and by explicit ids.  ``history=True`` keeps the queue's message
        history (``Queue.events``) for ``history_retention`` seconds (default 7 days).
        ``large_payloads=True`` stores messages over ``maximum_message_size`` (up to 2 GiB) in the
        payload store.  ``kms_master_key_id="alias/NAME"`` encrypts every message at rest under that
        master key of the broker's keyring (``sqs_managed_sse_enabled=True``: under the keyring's
        managed key ``alias/aws/sqs``), with a data key renewed every ``kms_data_key_reuse_period``
        seconds (default 300).
        Settings not given are not compared with an existing queue, as in SQS.
        ``sqs_settings`` takes the settings kept only for SQS clients: ``policy`` and
        ``fifo_throughput_limit``.
        """
        if not isinstance(fifo, bool):
            raise InvalidParameterValue(f"fifo must be True or False; got {fifo!r}")
        validation.queue_name(name, fifo=fifo)
        # The table's settings, as this signature spells them out (a test keeps the two equal).
        given = {key: value for key, value in locals().items() if key in queue_settings.KEYWORDS}
        given.update(sqs_settings)
        broker_calls.create(self._rt, name, fifo, given, tags)
        return Queue(self._rt, name, fifo)

    @audit.audited("CreateQueue", lambda self, prefix="tmp", *args, **kwargs: prefix)
    def temporary_queue(
        self,
        /,
        prefix: str = "tmp",
        idle_timeout: int = limits.DEFAULT_IDLE_TIMEOUT,
        *,
        fifo: bool = False,
        tags: Mapping[str, str] | None = None,
        **settings: Any,
    ) -> TemporaryQueue:
        """Create a uniquely named queue (``PREFIX-`` and 16 random hex digits, ``.fifo`` for a FIFO
        queue) that is deleted after ``idle_timeout`` seconds (60-86,400, default 300) without a send
        or receive, by any process's broker; this broker keeps it alive with heartbeats while it is
        open, and deletes it when it closes.  ``with broker.temporary_queue() as q:`` deletes it at
        the end of the block.  ``settings`` are those of :meth:`create_queue`."""
        name = broker_calls.create_temporary(self._rt, prefix, idle_timeout, fifo, tags, settings)
        return TemporaryQueue(self._rt, name, fifo)

    def reap_idle_queues(self) -> list[str]:
        """Delete every temporary queue idle for its idle timeout now (brokers also do this on their
        own, at most every 10 s); returns their names."""
        return self._rt.temporary_queues.reap(self._rt.now_ms())

    def get_queue(self, name: str) -> Queue:
        """The queue called ``name``; QueueDoesNotExist if there is none."""
        return Queue(self._rt, name, broker_calls.is_fifo(self._rt, name))

    def list_queues(self, prefix: str = "") -> list[str]:
        """Names of the queues that start with ``prefix``, sorted (idle temporary queues are
        deleted first)."""
        return broker_calls.list_names(self._rt, prefix)

    @audit.audited(DELETE_QUEUE, lambda self, name=None, *args, **kwargs: name)
    def delete_queue(self, name: str) -> None:
        """Delete a queue and its messages; the name can be used again at once."""
        self._rt.deleter.delete(name)

    def dead_letter_source_queues(self, name: str) -> list[str]:
        """Queues whose redrive policy names ``name`` as their dead-letter queue."""
        return broker_calls.dead_letter_sources(self._rt, name)

    # -- message move tasks -----------------------------------------------------

    @audit.audited("StartMessageMoveTask", lambda self, source=None, *args, **kwargs: source)
    def start_message_move(
        self, source: str, destination: str | None = None, max_per_second: int | None = None
    ) -> MoveTask:
        """Move messages out of dead-letter queue ``source``.

        They go back where they came from, or to ``destination``.
        """
        return self._rt.moves.start(source, destination, max_per_second)

    def list_message_moves(self, source: str) -> list[MoveTask]:
        """The message move tasks of ``source``, newest first."""
        return self._rt.moves.list(source)

    @audit.audited("CancelMessageMoveTask", lambda self, *args, **kwargs: None)
    def cancel_message_move(self, task_handle: str) -> MoveTask:
        """Ask a running task to stop; it moves nothing more after its current batch."""
        return self._rt.moves.cancel(task_handle)

    def audit(
        self,
        *,
        queue: str | None = None,
        since: datetime | None = None,
        after: int | None = None,
        limit: int = limits.DEFAULT_EVENT_LIMIT,
    ) -> list[AuditEvent]:
        """The audit trail, oldest first: management calls (create, delete, attributes, purge,
        tags, permissions, move tasks) with their time, process, OS user and outcome.
        ``queue``: only that queue's; ``since``: from that time on; ``after``: events whose
        ``event_id`` is above it (to resume); at most ``limit`` (1-100,000)."""
        return broker_calls.audit_events(self._rt, queue, since, after, limit)

    def management_call(
        self,
        action: str,
        queue: str | None,
        *,
        code_of: Callable[[BaseException], str | None] | None = None,
    ) -> AbstractContextManager[None]:
        """``with broker.management_call("PurgeQueue", name):`` around a management call that a program
        prepares before making it (the CLI and the endpoint look the queue up and check their own
        arguments): a refusal before the library's method is entered is recorded in the audit trail, as
        the method records its own.  A durableq error is a refusal with its code (the file's own trouble
        is none); ``code_of`` says which other errors are, with which code (None: not a refusal)."""
        validation.text("action", action)
        return audit.management_call(self._rt.db, self._rt.now_ms, action, queue, code_of)

    def message_events(
        self,
        *,
        after: int = 0,
        until: int | None = None,
        limit: int = limits.DEFAULT_EVENT_LIMIT,
    ) -> list[MessageEvent]:
        """The message history of every queue that keeps one, oldest first: events whose
        ``event_id`` is above ``after`` and at most ``until`` (default: the newest), at most
        ``limit`` (1-100,000).  Ids only grow, and no event is read while one with a lower id may still
        commit (on PostgreSQL, where writes commit side by side, the read waits for the writes under
        way), so a reader resumes after the last one it saw and misses none."""
        return broker_calls.message_events(self._rt, after, until, limit)

    def newest_event_id(self) -> int:
        """The highest message-event id of the database (0 if none): later events have higher ids, and
        no event at or below it is still to commit (a bound to read up to, with ``until``)."""
        return broker_calls.newest_event_id(self._rt)

    def wait_for_message_move(self, task_handle: str, timeout: float | None = None) -> None:
        """Block until a task started by this broker has ended (or ``timeout`` seconds pass)."""
        self._rt.moves.wait(task_handle, timeout)
