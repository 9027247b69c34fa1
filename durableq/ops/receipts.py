"""Receipt handles.

A handle is ``QUEUE.ROW.SECRET.NONCE``: the queue's id, the message's row id,
the message's random secret (the same in every handle of that message), and
a random nonce that is new on every receive.  The row and secret name the
message, so a handle never acts on another message that reuses the row id;
the nonce tells the latest handle apart from older ones.  Handles are built
inside the receive statement itself, from the dialect's ``new_handle``
(``durableq.engines.dialect``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import Reason, ReceiptHandleIsInvalid

_MAX_ID = 2**63 - 1
_HANDLE = re.compile(r"(\d{1,19})\.(\d{1,19})\.([0-9a-f]{16})\.([0-9a-f]{16})", re.ASCII)


class Receipt(NamedTuple):
    """A parsed handle (a tuple: parsing is on every delete and change-visibility)."""

    handle: str
    queue_id: int
    row_id: int
    secret: str

    def check_queue(self, queue_id: int, queue_name: str) -> None:
        if self.queue_id != queue_id:
            raise ReceiptHandleIsInvalid(
                template="receipt handle {value!r} belongs to another queue, not to {queue!r}",
                parameter="receipt_handle",
                value=self.handle,
                queue=queue_name,
                reason=Reason.CONFLICT,
            )


def parse(handle: object) -> Receipt:
    """The queue and message a handle names, if it is well formed."""
    match = _HANDLE.fullmatch(handle) if isinstance(handle, str) else None
    if match is None:
        shown = handle[:80] if isinstance(handle, str) else handle
        raise ReceiptHandleIsInvalid(
            template="receipt handle {value!r} is malformed; use a handle returned by receive",
            parameter="receipt_handle",
            value=shown,
            reason=Reason.FORM,
        )
    queue_id, row_id = int(match.group(1)), int(match.group(2))
    if queue_id > _MAX_ID or row_id > _MAX_ID:  # no SQLite row id is that large
        raise ReceiptHandleIsInvalid(
            template="receipt handle {value!r} is malformed; use a handle returned by receive",
            parameter="receipt_handle",
            value=match.string[:80],
            reason=Reason.FORM,
        )
    return Receipt(match.string, queue_id, row_id, match.group(3))
