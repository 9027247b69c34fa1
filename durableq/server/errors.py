"""SQS errors on the wire: the shape name, the legacy query code and the HTTP status of each.

SQS moved from the query protocol to AWS JSON 1.0 but stayed *query compatible*:
a JSON error names its shape in ``__type`` and repeats the old query code in
the ``x-amzn-query-error`` header.  botocore raises the modeled exception of
the shape (``client.exceptions.QueueDoesNotExist``) and puts the legacy code in
``Error.Code`` (``AWS.SimpleQueueService.NonExistentQueue``), as with real SQS.
"""

from __future__ import annotations

import logging
import re

from durableq import errors
from durableq.text import printable

from .wording import Worded

log = logging.getLogger(__name__)

# Shape -> (legacy query code, HTTP status), as the SQS API model declared them
# (botocore's SQS model no longer carries the codes; SDKs still match on them).
_MODELED: dict[str, tuple[str, int]] = {
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400),
    "KmsAccessDenied": ("KMS.AccessDeniedException", 400),
    "KmsNotFound": ("KMS.NotFoundException", 400),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400),
    "OverLimit": ("OverLimit", 403),
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400),
    "QueueNameExists": ("QueueAlreadyExists", 400),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", 404),
    "ResourceNotFoundException": ("ResourceNotFoundException", 404),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400),
}


# Characters XML 1.0 cannot hold (and lone surrogates, which no UTF-8 can): a message that repeats
# a client's bad input must still render in both protocols.
_UNPRINTABLE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class WireError(Exception):
    """An error as a client sees it: ``shape`` (JSON ``__type``), ``code`` (query code), HTTP ``status``."""

    def __init__(
        self,
        shape: str,
        message: str,
        *,
        code: str | None = None,
        status: int = 400,
        sender: bool = True,
        query_message: str | None = None,
    ) -> None:
        message = _UNPRINTABLE.sub("?", message)
        super().__init__(message)
        self.shape = shape
        self.code = code or shape
        self.status = status
        self.message = message
        self.sender = sender
        self.query_message = message if query_message is None else _UNPRINTABLE.sub("?", query_message)

    @property
    def fault(self) -> str:
        return "Sender" if self.sender else "Receiver"


def legacy_code(shape: str) -> str:
    """The query code SQS reports for an error shape (also a failed batch entry's ``Code``)."""
    return _MODELED.get(shape, (shape, 400))[0]


def from_library(exc: errors.DurableQError) -> WireError:
    """The SQS error for a durableq error; database trouble is the server's fault, not the client's.

    The server's own trouble is told in SQS terms only: the file's path and
    SQLite's words go to the server's log, never to a client.
    """
    if isinstance(exc, errors.DatabaseLocked):
        # 503 makes SDKs retry with back-off, which is what a busy file wants.
        log.warning("database busy: %s", printable(exc.message))
        return service_unavailable("the queue database is busy; retry the request")
    if isinstance(exc, (errors.DatabaseError, errors.MessageCorrupt)):
        log.error("database error: %s", printable(exc.message))
        return internal_error()
    code, status = _MODELED.get(exc.code, (exc.code, 400))
    return WireError(exc.code, exc.message, code=code, status=status)


def from_action(exc: errors.DurableQError, worded: Worded) -> WireError:
    """The SQS error for a library error raised by an action, in SQS's words (see :mod:`.wording`)."""
    if isinstance(exc, (errors.DatabaseError, errors.MessageCorrupt)):
        return from_library(exc)
    code, status = _MODELED.get(worded.code, (worded.code, 400))
    return WireError(
        worded.code, worded.message, code=code, status=status, query_message=worded.query_message
    )


def internal(exc: BaseException) -> WireError:
    """A bug: logged with its traceback, reported without it."""
    log.error("unexpected error while serving a request", exc_info=exc)
    return internal_error()


def internal_error() -> WireError:
    return WireError(
        "InternalFailure",
        "the server could not complete the request; its log has the details",
        code="InternalError",
        status=500,
        sender=False,
    )


def service_unavailable(message: str) -> WireError:
    return WireError("ServiceUnavailable", message, status=503, sender=False)


def unknown_action(action: str) -> WireError:
    return WireError("InvalidAction", f"the action {action!r} is not valid for this endpoint")
