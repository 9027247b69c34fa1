"""The queue settings, declared once: what each one is called, takes and means.

Every reader of queue settings takes them from :data:`SETTINGS`: the checks of
``create_queue`` and ``set_attributes`` (``ops/settings.py``), the endpoint's
queue attributes (``server/queue_attributes.py``), the options of
``durableq queue create`` (``cli/queues.py``) and the table of settings in docs/configuration.md
(checked by ``tests/docs/test_settings_table.py``).  Numbers come from
:mod:`durableq.limits`.  ``Broker.create_queue`` spells the settings out as typed
keyword arguments, for readers and type checkers; a test keeps them equal to this
table.  A setting's value lives in the queue row's column of the same name
(``engines/schema.py``), or in its :attr:`Setting.columns`.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import limits
from .types import RedriveAllowPolicy, RedrivePolicy

#: What a setting's value is.
Kind = type[int] | type[bool] | type[str] | type[RedrivePolicy] | type[RedriveAllowPolicy]


@dataclass(frozen=True, slots=True)
class Setting:
    """One queue setting."""

    #: The keyword of ``create_queue`` / ``set_attributes`` and the key of ``Queue.attributes()``.
    name: str
    #: Its Python type (a policy setting also takes None: no policy).
    kind: Kind
    #: What it means (the docs' table and the CLI's help say it so), without a final period.
    description: str
    #: What a queue that was not given it has (None: nothing, e.g. no redrive policy).
    default: object = None
    #: The allowed range of a number, and its unit.
    low: int | None = None
    high: int | None = None
    unit: str | None = None
    #: The values a text setting allows.
    choices: tuple[str, ...] | None = None
    #: SQS's name of the queue attribute (None: the endpoint has none).
    sqs: str | None = None
    #: The option of ``durableq queue create`` (None: ``queue set`` only).
    option: str | None = None
    #: Only FIFO queues have it (a standard queue refuses it).
    fifo_only: bool = False
    #: ``set_attributes`` may change it (a queue's type never changes).
    settable: bool = True
    #: Kept for SQS clients, not acted on: ``create_queue`` takes it among its ``**sqs_settings``.
    sqs_client_only: bool = False
    #: The queue row's columns that hold it (empty: the column of its name).
    columns: tuple[str, ...] = ()

    @property
    def stored_in(self) -> tuple[str, ...]:
        """The columns of the queue row that hold this setting."""
        return self.columns or (self.name,)


def _seconds(
    name: str, description: str, default: int, low: int, high: int, sqs: str | None, option: str
) -> Setting:
    return Setting(name, int, description, default, low, high, "seconds", sqs=sqs, option=option)


#: Every queue setting, in the order ``Queue.attributes()`` shows them and messages list them.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "fifo",
        bool,
        f"A FIFO queue (its name must end in {limits.FIFO_SUFFIX})",
        False,
        sqs="FifoQueue",
        option="--fifo",
        settable=False,
    ),
    _seconds(
        "visibility_timeout",
        "Seconds a received message stays hidden",
        limits.DEFAULT_VISIBILITY_TIMEOUT,
        0,
        limits.MAX_VISIBILITY_TIMEOUT,
        "VisibilityTimeout",
        "--visibility-timeout",
    ),
    _seconds(
        "delay_seconds",
        "Seconds new messages wait before they can be received",
        limits.DEFAULT_DELAY_SECONDS,
        0,
        limits.MAX_DELAY_SECONDS,
        "DelaySeconds",
        "--delay",
    ),
    _seconds(
        "retention_period",
        "Seconds a message is kept",
        limits.DEFAULT_RETENTION_PERIOD,
        limits.MIN_RETENTION_PERIOD,
        limits.MAX_RETENTION_PERIOD,
        "MessageRetentionPeriod",
        "--retention",
    ),
    _seconds(
        "receive_wait_time",
        "Default long-poll seconds of a receive",
        limits.DEFAULT_RECEIVE_WAIT_TIME,
        0,
        limits.MAX_RECEIVE_WAIT_TIME,
        "ReceiveMessageWaitTimeSeconds",
        "--wait",
    ),
    Setting(
        "maximum_message_size",
        int,
        "Maximum message size in bytes",
        limits.DEFAULT_MAXIMUM_MESSAGE_SIZE,
        limits.MIN_MAXIMUM_MESSAGE_SIZE,
        limits.MAX_MAXIMUM_MESSAGE_SIZE,
        "bytes",
        sqs="MaximumMessageSize",
        option="--max-size",
    ),
    _seconds(
        "kms_data_key_reuse_period",
        "Seconds a data key encrypts messages before a new one is made",
        limits.DEFAULT_KMS_DATA_KEY_REUSE_PERIOD,
        limits.MIN_KMS_DATA_KEY_REUSE_PERIOD,
        limits.MAX_KMS_DATA_KEY_REUSE_PERIOD,
        "KmsDataKeyReusePeriodSeconds",
        "--kms-reuse",
    ),
    _seconds(
        "history_retention",
        "Seconds message history is kept",
        limits.DEFAULT_HISTORY_RETENTION,
        limits.MIN_HISTORY_RETENTION,
        limits.MAX_HISTORY_RETENTION,
        None,
        "--history-retention",
    ),
    Setting(
        "history",
        bool,
        "Keep the message history (`Queue.events`, `durableq events`, Spark's events())",
        False,
        option="--history",
    ),
    Setting(
        "large_payloads",
        bool,
        "Store bodies over the maximum message size, or binary, outside the file "
        "(up to 2 GiB; `send --payload`)",
        False,
        # durableq's own attribute, named in SQS's style.
        sqs="LargePayloadsEnabled",
        option="--large-payloads",
    ),
    Setting(
        "content_based_deduplication",
        bool,
        "FIFO: deduplicate by the SHA-256 of the body",
        False,
        sqs="ContentBasedDeduplication",
        option="--content-dedup",
        fifo_only=True,
    ),
    Setting(
        "deduplication_scope",
        str,
        "FIFO: deduplication ids count per queue or per message group",
        limits.DEFAULT_DEDUPLICATION_SCOPE,
        choices=limits.DEDUPLICATION_SCOPES,
        sqs="DeduplicationScope",
        option="--dedup-scope",
        fifo_only=True,
    ),
    Setting(
        "fifo_throughput_limit",
        str,
        "FIFO: SQS's throughput quota (kept for SQS clients; durableq has none)",
        limits.DEFAULT_FIFO_THROUGHPUT_LIMIT,
        choices=limits.FIFO_THROUGHPUT_LIMITS,
        sqs="FifoThroughputLimit",
        fifo_only=True,
        sqs_client_only=True,
    ),
    Setting(
        "redrive_policy",
        RedrivePolicy,
        "Dead-letter queue (it must exist, of the same type) and the receives before a message moves there",
        sqs="RedrivePolicy",
        option="--dlq",
        columns=("dead_letter_queue", "max_receive_count"),
    ),
    Setting(
        "redrive_allow_policy",
        RedriveAllowPolicy,
        "Which queues may use this one as their dead-letter queue",
        sqs="RedriveAllowPolicy",
        option="--redrive-allow",
        columns=("redrive_permission", "redrive_source_queues"),
    ),
    Setting(
        "kms_master_key_id",
        str,
        "Encrypt messages with this master key of the keyring",
        sqs="KmsMasterKeyId",
        option="--kms-key",
    ),
    Setting(
        "sqs_managed_sse_enabled",
        bool,
        f"Encrypt messages with the keyring's managed key (alias/{limits.MANAGED_KEY_ALIAS})",
        False,
        sqs="SqsManagedSseEnabled",
        option="--sse",
    ),
    Setting(
        "policy",
        str,
        "The access policy, a JSON document (kept for SQS clients; durableq enforces no IAM)",
        sqs="Policy",
        sqs_client_only=True,
    ),
)

#: The settings by name.
BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}
#: The settings ``set_attributes`` takes (every one but the queue's type), in order.
SETTABLE: tuple[Setting, ...] = tuple(setting for setting in SETTINGS if setting.settable)
#: The settings ``create_queue`` spells out as keyword arguments (``fifo`` is one of them too).
KEYWORDS: tuple[str, ...] = tuple(s.name for s in SETTABLE if not s.sqs_client_only)


def sqs_name(name: str) -> str:
    """SQS's name of a setting (the name itself where SQS has none)."""
    setting = BY_NAME.get(name)
    return setting.sqs if setting is not None and setting.sqs is not None else name
