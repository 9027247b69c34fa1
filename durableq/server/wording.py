"""SQS's own words for durableq's errors: the one table the endpoint words library errors with.

The library's messages say what was wrong and what is allowed in durableq's
terms (``group_id``, ``delay_seconds``).  Clients of the endpoint get SQS's
texts instead, because SDKs, tools and test suites compare them.  Each row is
for library errors of one code, and of a ``reason`` and ``parameter`` where the
code covers several rules (see :mod:`durableq.errors`); it formats SQS's text
from the error's fields (``value``, ``high``, ``entry_id``, ...), SQS's numbers
from :mod:`durableq.limits`, then from the request: ``action``, ``queue`` and
any request member (``{DelaySeconds}``; in a batch, the entry's).  A row may
also name the code SQS reports the rule under, where it is not the library's,
and the query protocol's text where it differs.  An error no row is for keeps
the library's message.  The endpoint's own checks of a request (a missing
member, an unknown attribute) raise in SQS's words and need no row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from durableq import errors, limits
from durableq.errors import DurableQError, Reason
from durableq.queue_settings import sqs_name
from durableq.types import BatchFailure

# durableq's names of arguments -> SQS's names of request members (settings: durableq/queue_settings.py).
_MEMBERS = {
    "max_messages": "MaxNumberOfMessages",
    "wait_time": "WaitTimeSeconds",
    "visibility_timeout": "VisibilityTimeout",
    "visibility timeout": "VisibilityTimeout",
    "delay_seconds": "DelaySeconds",
}
_RANGE_REASONS = {
    "MaxNumberOfMessages": f"Must be between 1 and {limits.MAX_MESSAGES_PER_RECEIVE}, if provided.",
    "WaitTimeSeconds": f"Must be >= 0 and <= {limits.MAX_RECEIVE_WAIT_TIME}, if provided.",
    "VisibilityTimeout": f"Must be >= 0 and <= {limits.MAX_VISIBILITY_TIMEOUT}, if provided.",
    "DelaySeconds": f"DelaySeconds must be >= 0 and <= {limits.MAX_DELAY_SECONDS}.",
}
_NOT_FOR_THIS_QUEUE_TYPE = "The request include parameter that is not valid for this queue type."
_ALLOWED_BODY = (
    "#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"  # as SQS lists them
)
#: The reasons of an attribute value that is wrong in itself (SQS: "Invalid value for the parameter").
_BAD_VALUE = (Reason.RANGE, Reason.CHOICE, Reason.TYPE, Reason.FORM, Reason.TOO_LARGE)

Fields = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Wording:
    """One rule's SQS text: for library errors of ``code`` (and of ``reasons`` and ``parameters``)."""

    code: str
    message: str | Callable[[Fields], str]
    reasons: tuple[Reason, ...] | None = None  # None: any
    parameters: tuple[str, ...] | None = None  # None: any
    sqs_code: str | None = None
    query_message: str | None = None
    entry: bool | None = None  # only for a batch entry's failure (True) or only for a request (False)

    def matches(self, error: DurableQError, entry: bool) -> bool:
        return (
            error.code == self.code
            and self.entry in (None, entry)
            and (self.reasons is None or error.reason in self.reasons)
            and (self.parameters is None or error.parameter in self.parameters)
        )


def _member(fields: Fields) -> str:
    """SQS's name of the error's parameter."""
    parameter: str = fields["parameter"]
    return _MEMBERS.get(parameter) or sqs_name(parameter)


def _out_of_range(fields: Fields) -> str:
    member = _member(fields)
    reason = _RANGE_REASONS.get(member, "Value is out of range.")
    return f"Value {fields['value']!r} for parameter {member} is invalid. Reason: {reason}"


def _bad_body_character(fields: Fields) -> str:
    return (
        f"Invalid binary character '#x{ord(fields['value']):X}' was found in the message body, "
        f"the set of allowed characters is {_ALLOWED_BODY}"
    )


def _fifo_ids_on_standard(fields: Fields) -> str:
    member = "MessageGroupId" if fields["parameter"] == "group_id" else "MessageDeduplicationId"
    return f"Value {fields['value']} for parameter {member} is invalid. Reason: {_NOT_FOR_THIS_QUEUE_TYPE}"


TABLE: tuple[Wording, ...] = (
    # -- queues ------------------------------------------------------------------
    Wording(
        "QueueDoesNotExist",
        "The specified queue does not exist.",
        query_message="The specified queue does not exist for this wsdl version.",
    ),
    Wording(
        "InvalidParameterValue",
        "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, "
        f"must end with {limits.FIFO_SUFFIX} suffix and be 1 to {limits.MAX_QUEUE_NAME_LENGTH} in length.",
        reasons=(Reason.FIFO_NAME,),
    ),
    Wording(
        "InvalidParameterValue",
        "Can only include alphanumeric characters, hyphens, or underscores. "
        f"1 to {limits.MAX_QUEUE_NAME_LENGTH} in length",
        parameters=("queue name",),
    ),
    Wording(
        "QueueNameExists",
        lambda f: (
            "A queue already exists with the same name and a different value for attribute "
            f"{sqs_name(f['names'][0])}"
        ),
    ),
    Wording(
        "InvalidAttributeName", lambda f: f"Unknown Attribute {_member(f)}.", reasons=(Reason.FIFO_ONLY,)
    ),
    Wording(
        "InvalidAttributeValue",
        lambda f: f"Invalid value for the parameter {_member(f)}.",
        reasons=_BAD_VALUE,
    ),
    Wording(
        "InvalidParameterValue",
        "Too many tags added for queue {queue}.",
        reasons=(Reason.TOO_MANY,),
        parameters=("tags",),
    ),
    Wording(
        "InvalidParameterValue",
        "Value {value} for parameter Label is invalid. Reason: Already exists.",
        reasons=(Reason.EXISTS,),
        parameters=("label",),
    ),
    Wording(
        "InvalidParameterValue",
        "Value {value} for parameter Label is invalid. Reason: can't find label on existing policy.",
        reasons=(Reason.NOT_FOUND,),
        parameters=("label",),
    ),
    Wording(
        "InvalidParameterValue",
        "Value SQS:{value} for parameter ActionName is invalid. Reason: Only the queue owner is allowed to "
        "invoke this action.",
        reasons=(Reason.CHOICE,),
        parameters=("actions",),
    ),
    Wording("MissingParameter", "The request must contain the parameter Actions.", parameters=("actions",)),
    Wording(
        "MissingParameter",
        "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        parameters=("account_ids",),
        sqs_code="InvalidParameterValue",
    ),
    Wording(
        "OverLimit",
        "{value} Actions were found, maximum allowed is {high}.",
        parameters=("actions",),
    ),
    # -- messages ----------------------------------------------------------------
    Wording(
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than {high} bytes.",
        reasons=(Reason.TOO_LARGE,),
        parameters=("message",),
    ),
    Wording(
        "InvalidParameterValue",
        "The request must contain the parameter MessageBody.",
        reasons=(Reason.MISSING,),
        parameters=("body",),
        sqs_code="MissingParameter",
    ),
    Wording("InvalidMessageContents", _bad_body_character, parameters=("body",)),
    Wording(
        "InvalidParameterValue",
        "The message attribute name '{value}' is invalid. Attribute name can contain A-Z, a-z, 0-9, "
        "underscore (_), hyphen (-), and period (.) characters.",
        parameters=("attribute name",),
    ),
    Wording(
        "InvalidParameterValue",
        "The message attribute '{key}' has an invalid message attribute type, the set of supported "
        "type prefixes is Binary, Number, and String.",
        parameters=("attribute type",),
    ),
    Wording(
        "InvalidParameterValue",
        "Can't cast the value of message (user) attribute '{key}' to a number.",
        reasons=(Reason.FORM,),
        parameters=("attribute value",),
    ),
    Wording(
        "InvalidParameterValue",
        "Number of message attributes [{value}] exceeds the allowed maximum [{high}].",
        reasons=(Reason.TOO_MANY,),
        parameters=("attributes",),
    ),
    Wording(
        "MissingParameter",
        "The request must contain the parameter MessageGroupId.",
        parameters=("group_id",),
    ),
    Wording(
        "MissingParameter",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
        "provided explicitly",
        parameters=("deduplication_id",),
        sqs_code="InvalidParameterValue",
    ),
    Wording(
        "InvalidParameterValue",
        f"Value {{value}} for parameter DelaySeconds is invalid. Reason: {_NOT_FOR_THIS_QUEUE_TYPE}",
        reasons=(Reason.STANDARD_ONLY,),
        parameters=("delay_seconds",),
    ),
    Wording("InvalidParameterValue", _fifo_ids_on_standard, reasons=(Reason.FIFO_ONLY,)),
    Wording(
        "InvalidParameterValue",
        _out_of_range,
        reasons=(Reason.RANGE,),
        parameters=tuple(_MEMBERS),
    ),
    Wording(
        "InvalidParameterValue",
        "Value {value} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for "
        f"the message is beyond the limit [{limits.MAX_TOTAL_VISIBILITY} seconds]",
        reasons=(Reason.BEYOND_LIMIT,),
    ),
    Wording(
        "ReceiptHandleIsInvalid",
        'The input receipt handle "{value}" is not a valid receipt handle.',
        entry=True,
    ),
    Wording("ReceiptHandleIsInvalid", "The input receipt handle is invalid.", entry=False),
    Wording(
        "MessageNotInflight", "Message does not exist or is not available for visibility timeout change."
    ),
    Wording(
        "InvalidParameterValue",
        "Message does not exist or is not available for visibility timeout change.",
        reasons=(Reason.NOT_FOUND,),
        parameters=("receipt_handle",),
    ),
    # -- batches -----------------------------------------------------------------
    Wording("EmptyBatchRequest", "There should be at least one {action}RequestEntry in the request."),
    Wording(
        "TooManyEntriesInBatchRequest",
        f"Maximum number of entries per request are {limits.MAX_BATCH_ENTRIES}. You have sent {{value}}.",
    ),
    Wording(
        "InvalidBatchEntryId",
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
        f"It can be at most {limits.MAX_BATCH_ENTRY_ID_LENGTH} letters long.",
    ),
    Wording("BatchEntryIdsNotDistinct", "Id {entry_id} repeated."),
    Wording(
        "BatchRequestTooLong",
        "Batch requests cannot be longer than {high} bytes. You have sent {value} bytes.",
    ),
)


@dataclass(frozen=True, slots=True)
class Worded:
    """An error as SQS words it: its code, its message, and the query protocol's message."""

    code: str
    message: str
    query_message: str


def word(
    error: DurableQError,
    request: Callable[[str], Any],
    *,
    action: str,
    queue: str | None,
    entry: bool = False,
) -> Worded:
    """SQS's code and text for a library error raised by ``action``.

    ``request`` gives the value of a request member (of the entry, for a batch entry's failure).
    """
    for row in TABLE:
        if not row.matches(error, entry):
            continue
        fields = _Fields(request, {"action": action, "queue": queue, **_data(error)})
        text = row.message(fields) if callable(row.message) else row.message.format_map(fields)
        return Worded(row.sqs_code or error.code, text, row.query_message or text)
    return Worded(error.code, error.message, error.message)


def failure_error(failure: BatchFailure) -> DurableQError:
    """The error of a failed batch entry (one made by hand has only its code and message)."""
    if failure.error is not None:
        return failure.error
    kind = getattr(errors, failure.code, None)
    if isinstance(kind, type) and issubclass(kind, DurableQError):
        return kind(failure.message)
    made = DurableQError(failure.message)
    made.code = failure.code
    return made


def _data(error: DurableQError) -> dict[str, Any]:
    """An error's fields that a row may format (those it lacks come from the request)."""
    data = {
        "parameter": error.parameter,
        "value": error.value,
        "low": error.low,
        "high": error.high,
        "key": error.key,
        "entry_id": error.entry_id,
        "names": error.names,
    }
    return {name: value for name, value in data.items() if value is not None}


class _Fields(dict[str, Any]):
    """A row's fields: the error's, then the request's members; one it lacks reads as empty."""

    def __init__(self, request: Callable[[str], Any], fields: Mapping[str, Any]) -> None:
        super().__init__(fields)
        self._request = request

    def __missing__(self, key: str) -> Any:
        value = self._request(key)
        return "" if value is None else value
