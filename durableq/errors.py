"""The exception tree of durableq.

Every error derives from :class:`DurableQError` and carries ``code``, the
class name, which is stable and equal to the SQS error code where SQS has
one.  Messages say what was wrong and what is allowed.

An error may also carry what it is about, as data (all optional):
``parameter`` (the library's name of the argument or setting), ``value`` (what
was given), ``low``/``high`` and ``unit`` (the allowed range, or the most
allowed), ``choices`` (the allowed values), ``queue``, ``key`` (an item of the
parameter: a message attribute's name, a tag's key), ``entry_id`` (a batch
entry), ``names`` (other library names it concerns) and ``reason`` (which rule,
where one code covers several: :class:`Reason`).  Programs that say an error in
their own words (the SQS endpoint, the command line) read these, never the
message's English.  An error made from a ``template`` has its message formatted
from these fields, and :meth:`DurableQError.spelled` formats it again with the
library's names spelled another way (the command line's ``--delay`` for
``delay_seconds``).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

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
    "Reason",
    "ReceiptHandleIsInvalid",
    "RequestTimeout",
    "ResourceNotFoundException",
    "SchemaVersionTooNew",
    "TooManyEntriesInBatchRequest",
    "UnsupportedOperation",
]


class Reason(StrEnum):
    """Which rule an error broke (:attr:`DurableQError.reason`), where one code covers several."""

    #: A number outside ``low``..``high`` (``unit``), or no number at all.
    RANGE = "range"
    #: Not one of ``choices``.
    CHOICE = "choice"
    #: Not of the type the parameter takes.
    TYPE = "type"
    #: Text not of the form the parameter takes (its characters, length, JSON, an ARN).
    FORM = "form"
    #: Not given, or empty.
    MISSING = "missing"
    #: More items than ``high`` (``value``: how many).
    TOO_MANY = "too_many"
    #: More bytes than ``high`` (``value``: how many).
    TOO_LARGE = "too_large"
    #: Applies to FIFO queues only, and the queue is standard.
    FIFO_ONLY = "fifo_only"
    #: Applies to standard queues only, and the queue is FIFO.
    STANDARD_ONLY = "standard_only"
    #: A FIFO queue's name that lacks the ``.fifo`` suffix.
    FIFO_NAME = "fifo_name"
    #: Given at creation only (a queue's type).
    FIXED = "fixed"
    #: Already exists.
    EXISTS = "exists"
    #: Names nothing that exists (or no longer does).
    NOT_FOUND = "not_found"
    #: A name the call does not know.
    UNKNOWN = "unknown"
    #: At odds with another setting, or with another queue.
    CONFLICT = "conflict"
    #: Would pass a limit that counts more than this call (a receive's 12 hours of visibility).
    BEYOND_LIMIT = "beyond_limit"


#: The fields a template formats (any other name in braces is a library name, spelled as asked).
_FIELDS = ("parameter", "value", "low", "high", "unit", "choices", "queue", "key", "entry_id", "names")


class _Listed(tuple[str, ...]):
    """Several names or choices: ``{names}`` formats them as ``a, b``, ``{names[0]}`` picks one."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return format(", ".join(self), spec)


class _Template(string.Formatter):
    def __init__(self, error: DurableQError, spell: Callable[[str], str]) -> None:
        self._error = error
        self._spell = spell

    def get_value(self, key: int | str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        assert isinstance(key, str), "a template names its fields"
        error = self._error
        if key == "parameter":
            return None if error.parameter is None else self._spell(error.parameter)
        if key == "names":
            return _Listed(self._spell(name) for name in error.names)
        if key == "choices":
            return _Listed(error.choices or ())
        if key in _FIELDS:
            return getattr(error, key)
        return self._spell(key)  # a library name: fifo=True, set_attributes, delay_seconds


class DurableQError(Exception):
    """Base class of every durableq error.

    ``DurableQError("what was wrong; what is allowed")`` takes a message; the
    fields (keyword-only) say the same as data.  With ``template`` instead of a
    message, the message is the template formatted with the fields:
    ``{parameter}``, ``{value!r}``, ``{low}``, ``{high}``, ``{unit}``, ``{queue!r}``,
    ``{key!r}``, ``{entry_id!r}``, ``{choices}`` and ``{names}`` (listed ``a, b``);
    any other name in braces (``{fifo=True}``) is a library name, spelled as
    :meth:`spelled` is asked.
    """

    code: str = "DurableQError"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = cls.__name__

    def __init__(
        self,
        message: str = "",
        /,
        *,
        template: str | None = None,
        parameter: str | None = None,
        value: object = None,
        low: float | None = None,
        high: float | None = None,
        unit: str | None = None,
        choices: Sequence[str] | None = None,
        queue: str | None = None,
        key: str | None = None,
        entry_id: str | None = None,
        names: Sequence[str] = (),
        reason: Reason | None = None,
    ) -> None:
        self.parameter = parameter
        self.value = value
        self.low = low
        self.high = high
        self.unit = unit
        self.choices = None if choices is None else tuple(choices)
        self.queue = queue
        self.key = key
        self.entry_id = entry_id
        self.names = tuple(names)
        self.reason = reason
        self._template = template
        if template is not None:
            message = self.spelled({})
        super().__init__(message)
        self.message = message

    @property
    def template(self) -> str:
        """What the message is formatted from (a message given as such, with its braces kept)."""
        if self._template is not None:
            return self._template
        return self.message.replace("{", "{{").replace("}", "}}")

    def spelled(self, words: Mapping[str, str]) -> str:
        """The message with each library name it uses spelled as ``words`` says (the others as they
        are): ``words={"delay_seconds": "--delay"}`` gives ``--delay must be from 0 to 900 ...``.
        Values the caller gave are never respelled."""
        if self._template is None:
            return self.message
        return _Template(self, lambda name: words.get(name, name)).format(self._template)


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
