"""SQS's own words for durableq's errors: the one table the endpoint rewords error messages with.

The library's messages say what was wrong and what is allowed in durableq's
terms (``group_id``, ``delay_seconds``).  Clients of the endpoint get SQS's
texts instead, because SDKs, tools and test suites compare them.  Each row
matches a library error by its code and a pattern of its message, and gives
SQS's text; its fields come from the pattern's named groups, then from the
request: ``action``, ``queue`` and any request member (``{DelaySeconds}``; in a
batch, the entry's).  A row may also name the code SQS reports the rule under,
where it is not the library's, and the query protocol's text where it differs.
An error no row matches keeps the library's message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from durableq.queue_settings import SETTINGS

# durableq's names of settings and arguments -> SQS's names of attributes and parameters.
_SQS_NAMES = {s.name: s.sqs for s in SETTINGS if s.sqs is not None} | {
    "max_messages": "MaxNumberOfMessages",
    "wait_time": "WaitTimeSeconds",
    "visibility timeout": "VisibilityTimeout",
    "delay_seconds": "DelaySeconds",
}
_RANGE_REASONS = {
    "MaxNumberOfMessages": "Must be between 1 and 10, if provided.",
    "WaitTimeSeconds": "Must be >= 0 and <= 20, if provided.",
    "VisibilityTimeout": "Must be >= 0 and <= 43200, if provided.",
    "DelaySeconds": "DelaySeconds must be >= 0 and <= 900.",
}
_NOT_FOR_THIS_QUEUE_TYPE = "The request include parameter that is not valid for this queue type."
_ALLOWED_BODY = (
    "#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"  # as SQS lists them
)

Fields = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Wording:
    """One rule's SQS text: for library errors of ``code`` whose message matches ``pattern``."""

    code: str
    pattern: str
    message: str | Callable[[Fields], str]
    sqs_code: str | None = None
    query_message: str | None = None
    entry: bool | None = None  # only for a batch entry's failure (True) or only for a request (False)

    def matches(self, code: str, message: str, entry: bool) -> re.Match[str] | None:
        if code != self.code or self.entry not in (None, entry):
            return None
        return re.search(self.pattern, message)


def _sqs_name(fields: Fields) -> str:
    name: str = fields["setting"]
    return _SQS_NAMES.get(name, name)


def _out_of_range(fields: Fields) -> str:
    parameter = _sqs_name(fields)
    reason = _RANGE_REASONS.get(parameter, "Value is out of range.")
    return f"Value {fields['value']} for parameter {parameter} is invalid. Reason: {reason}"


def _bad_body_character(fields: Fields) -> str:
    return (
        f"Invalid binary character '#x{int(fields['char'], 16):X}' was found in the message body, "
        f"the set of allowed characters is {_ALLOWED_BODY}"
    )


def _fifo_ids_on_standard(fields: Fields) -> str:
    parameter = "MessageGroupId" if fields["MessageGroupId"] else "MessageDeduplicationId"
    return (
        f"Value {fields[parameter]} for parameter {parameter} is invalid. Reason: {_NOT_FOR_THIS_QUEUE_TYPE}"
    )


TABLE: tuple[Wording, ...] = (
    # -- queues ------------------------------------------------------------------
    Wording(
        "QueueDoesNotExist",
        "",
        "The specified queue does not exist.",
        query_message="The specified queue does not exist for this wsdl version.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^FIFO queue name .* must end in",
        "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, "
        "must end with .fifo suffix and be 1 to 80 in length.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^queue name ",
        "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
    ),
    Wording(
        "QueueNameExists",
        r"exists with other attributes \((?P<setting>\w+)",
        lambda f: (
            f"A queue already exists with the same name and a different value for attribute {_sqs_name(f)}"
        ),
    ),
    Wording(
        "InvalidAttributeName",
        r"^unknown attribute (?P<name>.*?); known are",
        "Unknown Attribute {name}.",
    ),
    Wording(
        "InvalidAttributeName",
        r"^(?P<setting>\w+) applies to FIFO queues only",
        lambda f: f"Unknown Attribute {_sqs_name(f)}.",
    ),
    Wording(
        "InvalidAttributeValue",
        r"^(?P<setting>\w+) must be |^value .* for (?P<setting2>\w+) is invalid",
        lambda f: f"Invalid value for the parameter {_sqs_name(f) if f['setting'] else f['setting2']}.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^a queue holds at most \d+ tags",
        "Too many tags added for queue {queue}.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^a permission labelled '(?P<label>.*)' already exists",
        "Value {label} for parameter Label is invalid. Reason: Already exists.",
    ),
    Wording(
        "InvalidParameterValue",
        r"has no permission labelled '(?P<label>.*)'$",
        "Value {label} for parameter Label is invalid. Reason: can't find label on existing policy.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^action '(?P<name>.*)' is not allowed",
        "Value SQS:{name} for parameter ActionName is invalid. Reason: Only the queue owner is allowed to "
        "invoke this action.",
    ),
    Wording(
        "MissingParameter", r"needs at least one action", "The request must contain the parameter Actions."
    ),
    Wording(
        "MissingParameter",
        r"needs at least one account id",
        "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        sqs_code="InvalidParameterValue",
    ),
    Wording(
        "OverLimit",
        r"allows at most (?P<max>\d+) actions; got (?P<count>\d+)",
        "{count} Actions were found, maximum allowed is {max}.",
    ),
    Wording(
        "MissingParameter",
        r"^the request must contain the parameter (?P<parameter>\w+)",
        "The request must contain the parameter {parameter}.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^TagKeys must name at least one tag",
        "Tag keys must be between 1 and 128 characters in length.",
    ),
    # -- messages ----------------------------------------------------------------
    Wording(
        "InvalidParameterValue",
        r"^the message is \d+ bytes .* allows at most (?P<max>\d+)",
        "One or more parameters are invalid. Reason: Message must be shorter than {max} bytes.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^message body must not be empty",
        "The request must contain the parameter MessageBody.",
        sqs_code="MissingParameter",
    ),
    Wording(
        "InvalidMessageContents", r"^message body holds character U\+(?P<char>[0-9A-F]+)", _bad_body_character
    ),
    Wording(
        "InvalidParameterValue",
        r"^attribute name '(?P<name>.*)' is not allowed",
        "The message attribute name '{name}' is invalid. Attribute name can contain A-Z, a-z, 0-9, "
        "underscore (_), hyphen (-), and period (.) characters.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^attribute '(?P<name>.*)' has type ",
        "The message attribute '{name}' has an invalid message attribute type, the set of supported "
        "type prefixes is Binary, Number, and String.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^attribute '(?P<name>.*)' of type Number has value ",
        "Can't cast the value of message (user) attribute '{name}' to a number.",
    ),
    Wording(
        "InvalidParameterValue",
        r"^a message holds at most (?P<max>\d+) attributes; got (?P<count>\d+)",
        "Number of message attributes [{count}] exceeds the allowed maximum [{max}].",
    ),
    Wording(
        "MissingParameter",
        r"^group_id is required",
        "The request must contain the parameter MessageGroupId.",
    ),
    Wording(
        "MissingParameter",
        r"^deduplication_id is required",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
        "provided explicitly",
        sqs_code="InvalidParameterValue",
    ),
    Wording(
        "InvalidParameterValue",
        r"accepts only delay_seconds=0 per message",
        f"Value {{DelaySeconds}} for parameter DelaySeconds is invalid. Reason: {_NOT_FOR_THIS_QUEUE_TYPE}",
    ),
    Wording(
        "InvalidParameterValue",
        r"^group_id and deduplication_id apply to FIFO queues only",
        _fifo_ids_on_standard,
    ),
    Wording(
        "InvalidParameterValue",
        r"^(?P<setting>max_messages|wait_time|visibility_timeout|visibility timeout|delay_seconds) must be "
        r".*; got (?P<value>.*)$",
        _out_of_range,
    ),
    Wording(
        "InvalidParameterValue",
        r"^visibility timeout (?P<value>\d+) s would end more than",
        "Value {value} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for "
        "the message is beyond the limit [43200 seconds]",
    ),
    Wording(
        "ReceiptHandleIsInvalid",
        r"^receipt handle '(?P<handle>.*?)' ",
        'The input receipt handle "{handle}" is not a valid receipt handle.',
        entry=True,
    ),
    Wording("ReceiptHandleIsInvalid", "", "The input receipt handle is invalid.", entry=False),
    Wording(
        "MessageNotInflight", "", "Message does not exist or is not available for visibility timeout change."
    ),
    Wording(
        "InvalidParameterValue",
        r"^the message of receipt handle .* no longer exists",
        "Message does not exist or is not available for visibility timeout change.",
    ),
    # -- batches -----------------------------------------------------------------
    Wording("EmptyBatchRequest", "", "There should be at least one {action}RequestEntry in the request."),
    Wording(
        "TooManyEntriesInBatchRequest",
        r"got (?P<count>\d+)$",
        "Maximum number of entries per request are 10. You have sent {count}.",
    ),
    Wording(
        "InvalidBatchEntryId",
        "",
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
        "It can be at most 80 letters long.",
    ),
    Wording("BatchEntryIdsNotDistinct", r"^batch entry id '(?P<id>.*)' is used more", "Id {id} repeated."),
    Wording(
        "BatchRequestTooLong",
        r"add up to (?P<total>\d+) bytes; at most (?P<max>\d+)",
        "Batch requests cannot be longer than {max} bytes. You have sent {total} bytes.",
    ),
)


@dataclass(frozen=True, slots=True)
class Worded:
    """An error as SQS words it: its code, its message, and the query protocol's message."""

    code: str
    message: str
    query_message: str


def reword(
    code: str,
    message: str,
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
        found = row.matches(code, message, entry)
        if found is None:
            continue
        fields = _Fields(request, {"action": action, "queue": queue, **found.groupdict()})
        text = row.message(fields) if callable(row.message) else row.message.format_map(fields)
        return Worded(row.sqs_code or code, text, row.query_message or text)
    return Worded(code, message, message)


class _Fields(dict[str, Any]):
    """A row's fields: the pattern's groups, then the request's members; one it lacks reads as empty."""

    def __init__(self, request: Callable[[str], Any], fields: Mapping[str, Any]) -> None:
        super().__init__(fields)
        self._request = request

    def __missing__(self, key: str) -> Any:
        value = self._request(key)
        return "" if value is None else value
