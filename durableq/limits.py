"""Every limit and default of durableq, in one place.

Validation, the CLI help and the docs read these names; nothing else
hard-codes a number that belongs here.  Times are seconds unless the name
says otherwise.
"""

from __future__ import annotations

from typing import Final


class _Default:
    """The type of :data:`DEFAULT`: what an argument is when not given.

    The documented default applies, and ``create_queue`` on an existing queue
    compares only the settings given.  A parameter that may be left out is
    typed ``int | _Default = DEFAULT``; ``isinstance(value, _Default)`` (or
    ``value is DEFAULT``) tells whether it was given.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"


#: "Not given": the one instance of :class:`_Default`.
DEFAULT: Final = _Default()

# Queue attributes: defaults and allowed ranges (SPEC §2).
DEFAULT_VISIBILITY_TIMEOUT = 30
MAX_VISIBILITY_TIMEOUT = 43_200
#: A receive plus all its visibility extensions ends at most this long after the receive.
MAX_TOTAL_VISIBILITY = 43_200

DEFAULT_DELAY_SECONDS = 0
MAX_DELAY_SECONDS = 900

DEFAULT_RETENTION_PERIOD = 345_600
MIN_RETENTION_PERIOD = 60
MAX_RETENTION_PERIOD = 1_209_600

#: Message history (opt-in per queue): how long its events are kept.
DEFAULT_HISTORY_RETENTION = 604_800
MIN_HISTORY_RETENTION = 60
MAX_HISTORY_RETENTION = 1_209_600

#: Temporary queues (``Broker.temporary_queue``): deleted after this long without use.
DEFAULT_IDLE_TIMEOUT = 300
MIN_IDLE_TIMEOUT = 60
MAX_IDLE_TIMEOUT = 86_400
#: Idle temporary queues are looked for at most this often by each broker (broker clock).
REAP_INTERVAL = 10.0
#: Request-response (``durableq.rpc``): how long a call waits for its reply by default.
DEFAULT_CALL_TIMEOUT = 30.0
MAX_CALL_TIMEOUT = 43_200.0

DEFAULT_RECEIVE_WAIT_TIME = 0
MAX_RECEIVE_WAIT_TIME = 20

#: SQS's default and maximum since 2025.  The default is written into a queue's row when it is created,
#: so queues created under the older default (262,144) keep it until ``set_attributes`` changes it.
DEFAULT_MAXIMUM_MESSAGE_SIZE = 1_048_576
MIN_MAXIMUM_MESSAGE_SIZE = 1_024
MAX_MAXIMUM_MESSAGE_SIZE = 1_048_576

# Encryption at rest (the SSE analogue): a data key encrypts messages for this long, then a new one.
DEFAULT_KMS_DATA_KEY_REUSE_PERIOD = 300
MIN_KMS_DATA_KEY_REUSE_PERIOD = 60
MAX_KMS_DATA_KEY_REUSE_PERIOD = 86_400
MAX_KMS_KEY_ID_LENGTH = 2_048
#: The key a queue with ``sqs_managed_sse_enabled`` uses: the broker creates it in its keyring (the name
#: of the AWS managed key for SQS, so ``kms_master_key_id="alias/aws/sqs"`` means the same key).
MANAGED_KEY_ALIAS = "aws/sqs"
#: Keyring aliases: 1-256 characters of A-Z a-z 0-9 / _ -, as KMS aliases (without their ``alias/``).
MAX_KEY_ALIAS_LENGTH = 256
#: The keyring file holds master keys: readable by its owner only.
KEYRING_FILE_MODE = 0o600

# Large payloads (the Extended Client Library analogue), on queues with ``large_payloads``.
#: The largest message a queue with large payloads takes (stored outside the row above the queue's
#: ``maximum_message_size``).
MAX_PAYLOAD_SIZE = 2 * 1024**3
#: Payloads are written, encrypted and read in chunks of this many bytes: memory stays flat.
PAYLOAD_CHUNK_SIZE = 1024 * 1024
#: A payload file that no message row names is removed once it is this old (seconds): the files of
#: sends cut by a crash between writing the file and committing the row.
PAYLOAD_ORPHAN_GRACE = 3_600.0
#: A broker looks for such orphans at most this often (seconds, real time).
PAYLOAD_SWEEP_INTERVAL = 600.0
#: The payload store's folder and files (the database file's mode).
PAYLOAD_DIR_MODE = 0o700
MAX_POLICY_BYTES = 20_480
MAX_PERMISSION_LABEL_LENGTH = 80
#: Actions one AddPermission statement may allow (SQS refuses more with OverLimit).
MAX_PERMISSION_ACTIONS = 7
FIFO_THROUGHPUT_LIMITS = ("perQueue", "perMessageGroupId")
DEFAULT_FIFO_THROUGHPUT_LIMIT = "perQueue"
#: AWSTraceHeader, the one message system attribute SQS lets senders set.
MAX_TRACE_HEADER_LENGTH = 1_024

# Messages and batches.
DEFAULT_MAX_MESSAGES = 1
MAX_MESSAGES_PER_RECEIVE = 10
MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 1_048_576
MAX_BATCH_ENTRY_ID_LENGTH = 80
MAX_MESSAGE_ATTRIBUTES = 10
MAX_ATTRIBUTE_NAME_LENGTH = 256
MAX_ATTRIBUTE_TYPE_LENGTH = 256

#: Messages one ``peek`` shows by default, and at most.
DEFAULT_PEEK = 10
MAX_PEEK = 1_000

MAX_IN_FLIGHT_STANDARD = 120_000
MAX_IN_FLIGHT_FIFO = 20_000

# Fair queues (a standard queue whose messages carry a group id, SQS's tenant): a group is *noisy*
# while it holds more than this share (percent) of the queue's messages in flight ...
FAIR_NOISY_SHARE_PERCENT = 10
# ... and at least this many of them (AWS's documented concurrency-share thresholds).  A receive
# serves the other groups' visible messages first (``ops/fairness.py``).
FAIR_NOISY_MIN_IN_FLIGHT = 30

# FIFO.
FIFO_SUFFIX = ".fifo"
DEDUPLICATION_INTERVAL = 300
RECEIVE_ATTEMPT_INTERVAL = 300
MAX_FIFO_ID_LENGTH = 128
DEDUPLICATION_SCOPES = ("queue", "messageGroup")
#: How far the broker clock may step back (NTP, a resumed VM) without FIFO deduplication forgetting
#: an id early: ids and receive attempts are kept this much longer than their 5-minute windows.
MAX_CLOCK_STEP_BACK = 3_600
DEFAULT_DEDUPLICATION_SCOPE = "queue"

# Dead letters and message move tasks.
MIN_MAX_RECEIVE_COUNT = 1
MAX_MAX_RECEIVE_COUNT = 1_000
REDRIVE_PERMISSIONS = ("allowAll", "denyAll", "byQueue")
MAX_REDRIVE_SOURCE_QUEUES = 10
#: The fastest rate a message move task may be given (SQS's MaxNumberOfMessagesPerSecond).
MAX_MOVE_RATE = 500
#: Messages moved per transaction by a message move task.
MOVE_TASK_BATCH = 100
#: A RUNNING task whose runner has not reported for this long is marked FAILED.
MOVE_TASK_STALE_AFTER = 30.0

# Names and tags.
MAX_QUEUE_NAME_LENGTH = 80
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256
MAX_TAGS = 50

# The database file.
DURABILITY_LEVELS = ("full", "normal")
DEFAULT_DURABILITY = "full"
#: How long a call waits for another writer before raising DatabaseLocked.
DEFAULT_BUSY_TIMEOUT = 10.0
#: New database files (and so their WAL) are readable by their owner only.
DEFAULT_FILE_MODE = 0o600
#: The PostgreSQL schema durableq's tables live in (``durableq.open(url, schema=...)``): two schemas of
#: one database are two durableq installations.  Its name: lower-case letters, digits and ``_``, not
#: starting with a digit nor ``pg_`` (PostgreSQL's own), and short enough that the notification
#: channel (``durableq_<schema>``) stays within PostgreSQL's 63 bytes.
DEFAULT_POSTGRES_SCHEMA = "durableq"
MAX_SCHEMA_NAME_LENGTH = 48

# The worker (durableq.Worker and `durableq worker`).
DEFAULT_CONCURRENCY = 1
MAX_CONCURRENCY = 1_024
#: Seconds running handlers get to finish when the worker stops.
DEFAULT_GRACE_PERIOD = 30.0
MAX_GRACE_PERIOD = 86_400
#: The longest retry back-off of the default back-off (2, 4, 8 ... seconds).
MAX_BACKOFF = 900
#: How often a waiting worker checks whether it was asked to stop (its long polls last this long).
WORKER_STOP_CHECK = 1.0
#: How often ``durableq serve`` (``durableq.server.run``) looks whether SIGINT or SIGTERM came.
SERVER_STOP_CHECK = 0.2

#: The latest time a broker clock may read: 9999-12-31 (seconds since the epoch).
MAX_CLOCK = 253_402_300_799

# The command line.
#: ``durableq stats --window``: minutes its per-minute rates are averaged over (at most a year).
DEFAULT_STATS_WINDOW = 5
MAX_STATS_WINDOW = 366 * 24 * 60
#: ``durableq stats --watch --interval``: seconds between redraws.
DEFAULT_WATCH_INTERVAL = 2.0
MIN_WATCH_INTERVAL = 0.1
MAX_WATCH_INTERVAL = 3_600

# Internal pacing; not part of the contract, but kept with the other numbers.
#: Where the OS cannot tell of commits (no inotify), how often the WAL file's stamp is read while
#: some receive waits (one thread per process and file does it for every waiter).
LONG_POLL_INTERVAL = 0.008
#: After the WAL was written, how often the change watcher asks SQLite whether the commit shows
#: (it shows once its fsync is done): every 0.2 ms at first, less often as time passes (an eighth of
#: the time since the write, up to 5 ms), for half a second at most.
WATCH_SETTLE_STEP = 0.0002
WATCH_SETTLE_MAX_STEP = 0.005
WATCH_SETTLE_LIMIT = 0.5
#: While some receive waits, the change watcher asks SQLite this often in any case (a safety net).
WATCH_CONFIRM_INTERVAL = 1.0
#: The longest the change watcher waits in one turn: a timer further off (a message due centuries
#: away on a skewed clock) is looked at again after this, as no selector can wait that long.
WATCH_LONGEST_WAIT = 3_600.0
#: A waiting room wakes this long after the moment a message becomes visible (clock granularity).
LONG_POLL_TIMER_MARGIN = 0.001
#: With a clock of the caller's (tests), how often a waiting room reads it when a message is due.
LONG_POLL_CLOCK_INTERVAL = 0.01
#: How often a fork looks whether the other threads have left SQLite (engines/forks.py), and after
#: how many seconds of waiting it logs a warning (and again each time as long).
FORK_QUIET_STEP = 0.0005
FORK_WAIT_WARNING = 10.0
#: A waiting room whose look failed (a busy file) looks again after this long.
LONG_POLL_RETRY = 0.1
#: Expired messages are swept from a queue at most this often (broker clock).
RETENTION_SWEEP_INTERVAL = 1.0

# Reading events: the audit trail (Broker.audit, `durableq audit`) and message history (Queue.events).
DEFAULT_EVENT_LIMIT = 1_000
MAX_EVENT_LIMIT = 100_000
#: Event ids are SQLite row ids: 64-bit.
MAX_EVENT_ID = 2**63 - 1

# The buffered client (durableq.BufferedQueue).
#: A partial batch leaves this long after its first call (AWS's buffered client: 200 ms).
DEFAULT_BUFFER_WAIT = 0.2
MAX_BUFFER_WAIT = 60.0

# Spark analytics (durableq.analytics).
#: More parallel reads of the messages table than this only add JDBC connections to one SQLite file.
MAX_ANALYTICS_PARTITIONS = 1_024
#: The snapshot's folder inside a given ``snapshot_dir``: others may enter it (to open the copy by its
#: name, as executors under another OS user must) but not list it; ``snapshot_dir`` itself decides who
#: gets that far.  Without ``snapshot_dir`` the folder is private (0700) in the system temp folder.
SNAPSHOT_SHARED_DIR_MODE = 0o711
#: The snapshot copy: read-only for everyone who can reach it.
SNAPSHOT_FILE_MODE = 0o444
#: Outputs under a folder with the setgid bit (shared by the driver's and the executors' OS users):
#: the mode of the folders durableq makes there, and Hadoop's umask for Spark's folders and files
#: (``fs.permissions.umask-mode``): group-writable, so either user may write in the other's.
SHARED_OUTPUT_DIR_MODE = 0o2775
SHARED_OUTPUT_UMASK = "002"
#: The percentiles of the reports (ages, latency, processing, retries, wait), in Spark and in Arrow.
REPORT_PERCENTILES = (0.5, 0.9, 0.95, 0.99)
#: The accuracy of Spark's percentile_approx in the reports: the rank of each answer is within
#: (values / accuracy) of the exact one, and the sketch stays small (``exact`` computes them exactly).
PERCENTILE_ACCURACY = 10_000
#: The plot draws one row of panels per queue, for at most this many queues (the busiest).
MAX_PLOTTED_QUEUES = 6
#: Rates in the reports (``dead_letter_rate``) are rounded to this many decimal places: a share of
#: receives to 0.01 %, not the 17 digits of a double.
RATE_DIGITS = 4
#: The plot merges minutes into steps (1, 5, 15, 30 minutes, 1, 3, 6, 12 hours, 1 day) so that
#: a queue's line has at most this many points.
MAX_PLOT_POINTS = 300

# Transactions (Broker.transaction).
#: Idle connections a PostgreSQL broker keeps for its next transactions (``Broker.transaction()``
#: runs on a connection of its own, not the thread's).
TRANSACTION_SPARES = 4
#: PostgreSQL: how many statements one connection prepares (``PREPARE``, at a statement's second run in
#: a transaction of its own; see ``engines.postgres.prepared``).  The first ones are the hot path's; a
#: statement past the limit runs unprepared, so neither the server's nor this process's memory grows.
POSTGRES_PREPARED_STATEMENTS = 200

# The dashboard (``durableq dashboard``, durableq.dashboard).
DASHBOARD_HOST = "127.0.0.1"
DASHBOARD_PORT = 8899
#: Random bytes of the access token printed with the address (as Jupyter's, 24 bytes: 32 characters).
DASHBOARD_TOKEN_BYTES = 24
#: A token given with ``--token`` is at least this long (a password, not a PIN).
DASHBOARD_MIN_TOKEN = 16
#: A queue's charts cover this many hours by default (``?hours=``, 1 up to the maximum).
DASHBOARD_CHART_HOURS = 3
DASHBOARD_MAX_CHART_HOURS = 48
#: Messages a queue's page lists (oldest first), events a message's history page looks through
#: (the queue's newest), and audit rows one page shows (newest first).
DASHBOARD_MESSAGES = 50
DASHBOARD_HISTORY_SCAN = 10_000
DASHBOARD_AUDIT_ROWS = 500
# Schedules (Broker.create_schedule, `durableq scheduler`; docs/guides/schedules.md).
#: A schedule's name: EventBridge Scheduler's 1-64 characters of ``[0-9A-Za-z_.-]``.
MAX_SCHEDULE_NAME_LENGTH = 64
#: The shortest rate: ``rate(1 second)`` (EventBridge's shortest is one minute).
MIN_RATE_SECONDS = 1
#: The longest rate: about 100 years, so that every tick stays a 64-bit millisecond time.
MAX_RATE_SECONDS = 100 * 366 * 86_400
#: The years a cron expression may name (EventBridge's year field: 1970-2199); no tick after the last.
MIN_CRON_YEAR = 1970
MAX_CRON_YEAR = 2199
#: ``flexible_window`` (seconds; EventBridge's ``MaximumWindowInMinutes`` is 1-1,440 minutes).
DEFAULT_FLEXIBLE_WINDOW = 0
MAX_FLEXIBLE_WINDOW = 86_400
#: What a scheduler does with the ticks it missed (a downtime): one send, every one, or none.
CATCH_UP_MODES = ("latest", "all", "none")
DEFAULT_CATCH_UP = "latest"
#: ``catch_up="none"``: a tick is missed (not sent) once it is this many seconds past its send time.
SCHEDULE_LATE_GRACE = 60
#: The attributes durableq adds to each scheduled message (so a schedule's own attributes are two fewer).
SCHEDULE_NAME_ATTRIBUTE = "DurableQ.ScheduleName"
SCHEDULED_TIME_ATTRIBUTE = "DurableQ.ScheduledTime"
#: A scheduler looks for due ticks at least this often (seconds): a schedule another process created
#: or changed is seen within it; between, it sleeps until the next due tick it knows of.
SCHEDULER_POLL_INTERVAL = 1.0
#: Due ticks one round of a scheduler claims and sends at most (the next round takes the rest).
SCHEDULER_BATCH = 100
#: Schedules ``list_schedules`` returns at most.
MAX_SCHEDULES_LISTED = 10_000
