"""Messages on the wire: typed attributes, system attributes, filters and the MD5 digests.

Attribute values travel as ``{"DataType": ..., "StringValue" | "BinaryValue": ...}``
with Binary values in base64 in both protocols.  The digests are the
library's (``durableq.attributes.md5_of_attributes``); what a receive returns
and which digest covers it is decided here, per request.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from durableq import Attribute, Message
from durableq.errors import InvalidParameterValue
from durableq.ops.attributes import md5_of_attributes
from durableq.types import md5_hex

from .params import Params, shown
from .urls import Endpoint

#: The one message system attribute SQS lets a sender set.
TRACE_HEADER = "AWSTraceHeader"
SYSTEM_ATTRIBUTES = (
    "SenderId",
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageDeduplicationId",
    "MessageGroupId",
    TRACE_HEADER,
    "DeadLetterQueueSourceArn",
)
_ALL = ("All", ".*")
#: A payload stored outside, as the Extended Client Library points at one in S3 (its reserved names).
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
POINTER_BUCKET = "durableq-payload-store"
PAYLOAD_SIZE = "ExtendedPayloadSize"


def attributes_in(values: Mapping[str, Any]) -> dict[str, Attribute]:
    """durableq attributes for the wire form; the library checks names, types and values."""
    result = {}
    for name, value in values.items():
        if not isinstance(value, Mapping):
            raise InvalidParameterValue(
                f"message attribute {name!r} must be a structure with DataType and a value"
            )
        data_type = value.get("DataType") or ""
        if not isinstance(data_type, str):
            raise InvalidParameterValue(
                f"message attribute {name!r} has DataType {shown(data_type)}; it must be text"
            )
        if data_type.startswith("Binary"):
            result[name] = Attribute(data_type, _base64(name, value.get("BinaryValue")))
        else:
            result[name] = Attribute(
                data_type, _text(f"message attribute {name!r}", value.get("StringValue"))
            )
    return result


def _text(what: str, value: object) -> str:
    """A StringValue: text (missing is empty: the library says a value is needed)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidParameterValue(f"{what} has a StringValue that is not a string: {shown(value)}")
    return value


def trace_header_in(values: Mapping[str, Any]) -> str | None:
    """The AWSTraceHeader of ``MessageSystemAttributes`` (the only one SQS accepts)."""
    for name in values:
        if name != TRACE_HEADER:
            raise InvalidParameterValue(
                f"message system attribute {name!r} cannot be set; only {TRACE_HEADER} can"
            )
    if TRACE_HEADER not in values:
        return None
    value = values[TRACE_HEADER]
    if not isinstance(value, Mapping) or value.get("DataType") != "String":
        raise InvalidParameterValue(f"{TRACE_HEADER} must have DataType String and a StringValue")
    header = value.get("StringValue")
    if header is not None and not isinstance(header, str):
        raise InvalidParameterValue(f"{TRACE_HEADER} has a StringValue that is not a string: {shown(header)}")
    return header


def send_digests(attributes: Mapping[str, Attribute], trace_header: str | None) -> dict[str, str]:
    """The optional digests of a send result: of the message attributes and of the system attributes."""
    digests = {}
    if attributes:
        digests["MD5OfMessageAttributes"] = md5_of_attributes(attributes)
    if trace_header is not None:
        digests["MD5OfMessageSystemAttributes"] = md5_of_attributes(
            {TRACE_HEADER: Attribute("String", trace_header)}
        )
    return digests  # type: ignore[return-value]


class ReceiveView:
    """Which system and message attributes one ReceiveMessage asked for, and the message as it sees it."""

    def __init__(self, params: Params, endpoint: Endpoint) -> None:
        # Other names are ignored, as SQS does: typed SDKs offer queue attribute names here.
        names = {*params.texts("AttributeNames"), *params.texts("MessageSystemAttributeNames")}
        self._system = (
            SYSTEM_ATTRIBUTES if "All" in names else tuple(n for n in SYSTEM_ATTRIBUTES if n in names)
        )
        patterns = params.texts("MessageAttributeNames")
        self._all = any(p in _ALL for p in patterns)
        self._names = {p for p in patterns if not p.endswith(".*")}
        # "bar.*" asks for every attribute whose name starts with "bar" (SQS's prefix form).
        self._prefixes = tuple(p[:-2] for p in patterns if p.endswith(".*") and p not in _ALL)
        self._endpoint = endpoint

    def _wants(self, name: str) -> bool:
        return self._all or name in self._names or name.startswith(self._prefixes)

    def message(self, message: Message) -> dict[str, Any]:
        """The wire form of a received message.  A payload stored outside the row (sent through the
        library to a queue with large payloads) is never put on the wire: the body is a pointer in the
        form of the Extended Client Library, with the ``ExtendedPayloadSize`` attribute."""
        attributes = message.attributes
        if message.payload_size is None:
            body, md5 = message.body, message.md5_of_body
        else:
            body = json.dumps([POINTER_CLASS, {"s3BucketName": POINTER_BUCKET, "s3Key": message.message_id}])
            md5 = md5_hex(body)
            attributes = {**attributes, PAYLOAD_SIZE: Attribute("Number", str(message.payload_size))}
        wire: dict[str, Any] = {
            "MessageId": message.message_id,
            "ReceiptHandle": message.receipt_handle,
            "MD5OfBody": md5,
            "Body": body,
        }
        system = self._system_attributes(message)
        if system:
            wire["Attributes"] = system
        chosen = {name: a for name, a in attributes.items() if self._wants(name)}
        if chosen:
            wire["MD5OfMessageAttributes"] = md5_of_attributes(chosen)
            wire["MessageAttributes"] = {name: attribute_out(a) for name, a in chosen.items()}
        return wire

    def _system_attributes(self, message: Message) -> dict[str, str]:
        source = message.dead_letter_source
        values = {
            "SenderId": self._endpoint.account_id,
            "SentTimestamp": message.sent_timestamp,
            "ApproximateReceiveCount": message.receive_count,
            "ApproximateFirstReceiveTimestamp": message.first_receive_timestamp,
            "SequenceNumber": message.sequence_number,
            "MessageDeduplicationId": message.deduplication_id,
            "MessageGroupId": message.group_id,
            TRACE_HEADER: message.trace_header,
            "DeadLetterQueueSourceArn": None if source is None else self._endpoint.arn(source),
        }
        return {name: str(values[name]) for name in self._system if values[name] is not None}


def attribute_out(attribute: Attribute) -> dict[str, str]:
    # The value before DataType, as the API model orders them (and SQS writes its XML).
    value = attribute.value
    if isinstance(value, bytes):
        return {"BinaryValue": base64.b64encode(value).decode("ascii"), "DataType": attribute.data_type}
    return {"StringValue": value, "DataType": attribute.data_type}


def _base64(name: str, value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        return b""  # the library says a Binary attribute needs a value
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidParameterValue(
            f"message attribute {name!r} has a BinaryValue that is not base64"
        ) from exc
