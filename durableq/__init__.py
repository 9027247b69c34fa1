"""durableq: a durable message queue with the semantics of Amazon SQS, on one SQLite file or PostgreSQL.

import durableq
with durableq.open("queue.db") as broker:
    jobs = broker.create_queue("jobs")
    jobs.send("hello")
    for message in jobs.receive(max_messages=10, wait_time=20):
        ...
        jobs.delete(message.receipt_handle)
"""

from __future__ import annotations

from . import errors
from .broker import Broker, open, reopen
from .buffered import BufferedQueue
from .errors import (
    BatchEntryIdsNotDistinct,
    BatchRequestTooLong,
    BrokerClosed,
    DatabaseCorrupt,
    DatabaseError,
    DatabaseFull,
    DatabaseLocked,
    DatabaseReadOnly,
    DurableQError,
    EmptyBatchRequest,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    KmsAccessDenied,
    KmsNotFound,
    MessageCorrupt,
    MessageNotInflight,
    MissingParameter,
    NotADurableQDatabase,
    OverLimit,
    QueueDoesNotExist,
    QueueNameExists,
    ReceiptHandleIsInvalid,
    RequestTimeout,
    ResourceNotFoundException,
    SchemaVersionTooNew,
    TooManyEntriesInBatchRequest,
    UnsupportedOperation,
)
from .keyring import KeyInfo, Keyring
from .options import OpenOptions
from .queue import Queue
from .scheduler import Scheduler
from .schedules.definition import Schedule
from .schedules.firing import FiringRound, ScheduledSend
from .temporary import TemporaryQueue
from .transaction import Transaction
from .types import (
    Attribute,
    AuditEvent,
    BatchFailure,
    BatchResult,
    BatchSuccess,
    Message,
    MessageEvent,
    MinuteMetrics,
    MoveTask,
    PeekedMessage,
    QueueStats,
    RedriveAllowPolicy,
    RedrivePolicy,
    SendEntry,
    SendResult,
)
from .virtual import VirtualQueue
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Attribute",
    "AuditEvent",
    "BatchEntryIdsNotDistinct",
    "BatchFailure",
    "BatchRequestTooLong",
    "BatchResult",
    "BatchSuccess",
    "Broker",
    "BrokerClosed",
    "BufferedQueue",
    "DatabaseCorrupt",
    "DatabaseError",
    "DatabaseFull",
    "DatabaseLocked",
    "DatabaseReadOnly",
    "DurableQError",
    "EmptyBatchRequest",
    "FiringRound",
    "InvalidAttributeName",
    "InvalidAttributeValue",
    "InvalidBatchEntryId",
    "InvalidMessageContents",
    "InvalidParameterValue",
    "KeyInfo",
    "Keyring",
    "KmsAccessDenied",
    "KmsNotFound",
    "Message",
    "MessageCorrupt",
    "MessageEvent",
    "MessageNotInflight",
    "MinuteMetrics",
    "MissingParameter",
    "MoveTask",
    "NotADurableQDatabase",
    "OpenOptions",
    "OverLimit",
    "PeekedMessage",
    "Queue",
    "QueueDoesNotExist",
    "QueueNameExists",
    "QueueStats",
    "ReceiptHandleIsInvalid",
    "RedriveAllowPolicy",
    "RedrivePolicy",
    "RequestTimeout",
    "ResourceNotFoundException",
    "Schedule",
    "ScheduledSend",
    "Scheduler",
    "SchemaVersionTooNew",
    "SendEntry",
    "SendResult",
    "TemporaryQueue",
    "TooManyEntriesInBatchRequest",
    "Transaction",
    "UnsupportedOperation",
    "VirtualQueue",
    "Worker",
    "errors",
    "open",
    "reopen",
]
