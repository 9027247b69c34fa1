"""Every limit and default of durableq, in one place.

Validation, the CLI help and the README read these names; nothing else
hard-codes a number that belongs here.  Times are seconds unless the name
says otherwise.
"""

from __future__ import annotations

import enum
from typing import Final, Literal


class Default(enum.Enum):
    """The type of :data:`DEFAULT`: what an argument is when not given.

    The documented default applies, and ``create_queue`` on an existing queue
    compares only the settings given.  An enum member, so ``x is DEFAULT``
    narrows ``int | Default`` to ``int`` for type checkers.
    """

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


#: "Not given" (a typed sentinel: ``int | NotGiven = DEFAULT``).
DEFAULT: Final = Default.DEFAULT
NotGiven = Literal[Default.DEFAULT]

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

DEFAULT_RECEIVE_WAIT_TIME = 0
MAX_RECEIVE_WAIT_TIME = 20

DEFAULT_MAXIMUM_MESSAGE_SIZE = 262_144
MIN_MAXIMUM_MESSAGE_SIZE = 1_024
MAX_MAXIMUM_MESSAGE_SIZE = 1_048_576

# Settings kept for SQS clients (stored and returned, not acted on).
DEFAULT_KMS_DATA_KEY_REUSE_PERIOD = 300
MIN_KMS_DATA_KEY_REUSE_PERIOD = 60
MAX_KMS_DATA_KEY_REUSE_PERIOD = 86_400
MAX_KMS_KEY_ID_LENGTH = 2_048
MAX_POLICY_BYTES = 20_480
MAX_PERMISSION_LABEL_LENGTH = 80
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

#: Messages one ``peek`` may show.
MAX_PEEK = 1_000

MAX_IN_FLIGHT_STANDARD = 120_000
MAX_IN_FLIGHT_FIFO = 20_000

# FIFO.
FIFO_SUFFIX = ".fifo"
DEDUPLICATION_INTERVAL = 300
RECEIVE_ATTEMPT_INTERVAL = 300
MAX_FIFO_ID_LENGTH = 128
DEDUPLICATION_SCOPES = ("queue", "messageGroup")
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

# The command line.
#: ``durableq stats --window``: minutes its per-minute rates are averaged over (at most a year).
DEFAULT_STATS_WINDOW = 5
MAX_STATS_WINDOW = 366 * 24 * 60
#: ``durableq stats --watch --interval``: seconds between redraws.
DEFAULT_WATCH_INTERVAL = 2.0
MIN_WATCH_INTERVAL = 0.1
MAX_WATCH_INTERVAL = 3_600

# Internal pacing; not part of the contract, but kept with the other numbers.
#: How often an idle long poll looks for commits from other connections.
LONG_POLL_INTERVAL = 0.008
#: How soon a long poll looks again when the WAL moved but no commit shows yet.
LONG_POLL_SETTLE = 0.001
#: Expired messages are swept from a queue at most this often (broker clock).
RETENTION_SWEEP_INTERVAL = 1.0
