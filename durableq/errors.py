"""The exception tree of durableq.

Every error derives from :class:`DurableQError` and carries ``code``, the
class name, which is stable and equal to the SQS error code where SQS has
one.  Messages say what was wrong and what is allowed.
"""

from __future__ import annotations

__all__ = [
    "BatchEntryIdsNotDistinct",
    "BatchRequestTooLong",
    "BrokerClosed",
    "DatabaseCorrupt",
    "DatabaseError",
    "DatabaseFull",
    "DatabaseLocked",
    "DatabaseReadOnly",
    "DurableQError",
    "EmptyBatchRequest",
    "InvalidAttributeName",
    "InvalidAttributeValue",
    "InvalidBatchEntryId",
    "InvalidMessageContents",
    "InvalidParameterValue",
    "KmsAccessDenied",
    "KmsNotFound",
    "MessageCorrupt",
    "MessageNotInflight",
    "MissingParameter",
    "NotADurableQDatabase",
    "OverLimit",
    "QueueDoesNotExist",
    "QueueNameExists",
    "ReceiptHandleIsInvalid",
    "RequestTimeout",
    "ResourceNotFoundException",
    "SchemaVersionTooNew",
    "TooManyEntriesInBatchRequest",
    "UnsupportedOperation",
]


class DurableQError(Exception):
    """Base class of every durableq error."""

    code: str = "DurableQError"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = cls.__name__

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QueueDoesNotExist(DurableQError):
    """The named queue does not exist."""


class QueueNameExists(DurableQError):
    """A queue of that name exists with different attributes."""


class InvalidParameterValue(DurableQError):
    """An argument is outside what is allowed."""


class InvalidAttributeName(DurableQError):
    """An attribute name is unknown or does not apply to this queue type."""


class InvalidAttributeValue(DurableQError):
    """A queue attribute value is not allowed (for example a redrive policy)."""


class InvalidMessageContents(DurableQError):
    """A message body holds characters SQS does not allow."""


class MissingParameter(DurableQError):
    """A required argument was not given."""


class ReceiptHandleIsInvalid(DurableQError):
    """A receipt handle is malformed, belongs to another queue, or is no longer valid."""


class MessageNotInflight(DurableQError):
    """The receipt handle is not the message's latest one."""


class OverLimit(DurableQError):
    """The queue has reached its limit of messages in flight."""


class RequestTimeout(DurableQError):
    """No reply came to a request within its call's timeout (``durableq.rpc``)."""


class KmsAccessDenied(DurableQError):
    """The message cannot be encrypted or decrypted with the keys at hand: the broker has no keyring,
    or its key is not the one the message's data key was wrapped with."""


class KmsNotFound(DurableQError):
    """The queue's master key (or the version a message was encrypted under) is not in the keyring."""


class MessageCorrupt(DurableQError):
    """A stored message failed its check: a large payload whose SHA-256 does not match (or whose file
    is gone), or ciphertext that does not authenticate.  Its content is never returned."""


class EmptyBatchRequest(DurableQError):
    """A batch request holds no entries."""


class TooManyEntriesInBatchRequest(DurableQError):
    """A batch request holds more entries than allowed."""


class BatchEntryIdsNotDistinct(DurableQError):
    """Two entries of a batch share an id."""


class InvalidBatchEntryId(DurableQError):
    """A batch entry id is empty, too long or holds characters not allowed."""


class BatchRequestTooLong(DurableQError):
    """The messages of a batch add up to more bytes than allowed."""


class ResourceNotFoundException(DurableQError):
    """A message move task (or another non-queue resource) does not exist."""


class UnsupportedOperation(DurableQError):
    """The operation is not supported on this queue or in this state."""


class DatabaseError(DurableQError):
    """The database file cannot be used as asked."""


class BrokerClosed(DatabaseError):
    """The broker was closed: its queues take no more calls."""


class DatabaseLocked(DatabaseError):
    """Another connection held the database longer than the busy timeout."""


class DatabaseCorrupt(DatabaseError):
    """The file is not an SQLite database, or it is damaged."""


class DatabaseReadOnly(DatabaseError):
    """The database file or its directory cannot be written."""


class DatabaseFull(DatabaseError):
    """The disk (or a file size limit) is full."""


class NotADurableQDatabase(DatabaseError):
    """The file is an SQLite database of another application."""


class SchemaVersionTooNew(DatabaseError):
    """The file was migrated by a newer durableq than this one."""
