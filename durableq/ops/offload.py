"""Where a message's body goes: in its row, or (on a queue with ``large_payloads``) in the payload store.

The rule is the Extended Client Library's: a message over its queue's ``maximum_message_size`` is
stored outside, up to :data:`~durableq.limits.MAX_PAYLOAD_SIZE`; anything smaller stays in its row.
``send_file`` streams a file: what fits as message text is sent inline like any body, the rest
(larger, or binary) goes to the store chunk by chunk, never held in memory whole.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from .. import limits, validation
from ..errors import DurableQError, InvalidParameterValue, Reason
from . import attributes as attrs
from .payloads import Payloads, StoredPayload
from .queue_rows import QueueConfig
from .send import Outgoing


def offload(item: Outgoing, queue: QueueConfig, payloads: Payloads) -> Outgoing:
    """``item``, with its body moved to the payload store if the queue takes large payloads and the
    message is over its size limit (else as it is: the insert checks the limit)."""
    if not queue.large_payloads or item.size <= queue.maximum_message_size or item.payload is not None:
        return item
    data = item.body.encode("utf-8")
    if len(data) > limits.MAX_PAYLOAD_SIZE:
        raise InvalidParameterValue(
            template="the message body is {value} bytes; a queue with large payloads takes at most {high}",
            parameter="body",
            value=len(data),
            high=limits.MAX_PAYLOAD_SIZE,
            queue=queue.name,
            reason=Reason.TOO_LARGE,
        )
    return with_payload(item, payloads.write(None, data))


def with_body(item: Outgoing, body: str) -> Outgoing:
    """``item`` with the (checked) body ``body`` instead of its own."""
    size = len(body.encode("utf-8")) + (attrs.size(item.attributes) if item.attributes else 0)
    return dataclasses.replace(item, body=body, size=size, payload=None)


def with_payload(item: Outgoing, payload: StoredPayload) -> Outgoing:
    """``item`` whose body is ``payload``, in the payload store (its size counts its attributes only)."""
    size = attrs.size(item.attributes) if item.attributes else 0
    return dataclasses.replace(item, body="", size=size, payload=payload)


def from_file(
    item: Outgoing, source: str | os.PathLike[str] | BinaryIO, queue: QueueConfig, payloads: Payloads
) -> Outgoing:
    """``item`` (checked, its body a placeholder) with the contents of ``source`` as its body: inline if
    they are message text within the queue's size limit, else streamed to the payload store (on a queue
    with large payloads; InvalidParameterValue elsewhere)."""
    with _reading(source) as stream:
        first = stream.read(queue.maximum_message_size + 1)
        if not isinstance(first, bytes):
            raise InvalidParameterValue("send_file reads a binary file: open it with 'rb'")
        text = _message_text(first) if len(first) <= queue.maximum_message_size else None
        if text is not None:
            return offload(with_body(item, text), queue, payloads)
        if not queue.large_payloads:
            raise InvalidParameterValue(
                template="the file is more than {high} bytes, or not UTF-8 message text, "
                "and queue {queue!r} does not take large payloads ({large_payloads=True})",
                parameter="source",
                high=queue.maximum_message_size,
                queue=queue.name,
                reason=Reason.TOO_LARGE,
            )
        return with_payload(item, payloads.write(stream, first))


@contextmanager
def _reading(source: str | os.PathLike[str] | BinaryIO) -> Iterator[BinaryIO]:
    """A binary file object over ``source``: a path is opened (and closed after), a file object used."""
    if isinstance(source, (str, os.PathLike)):
        try:
            stream = open(source, "rb")
        except OSError as exc:
            raise InvalidParameterValue(f"cannot read {source}: {exc.strerror or exc}") from exc
        with stream:
            yield stream
    elif callable(getattr(source, "read", None)):
        yield source
    else:
        raise InvalidParameterValue(
            f"send_file takes a file path or a binary file object; got {type(source).__name__}"
        )


def _message_text(data: bytes) -> str | None:
    """``data`` as a message body, if it is UTF-8 text of characters a body may hold."""
    try:
        return validation.body(data.decode("utf-8"))
    except (UnicodeDecodeError, DurableQError):
        return None
