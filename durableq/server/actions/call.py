"""What an action gets: the broker, how to name queues for this client, and the request members."""

from __future__ import annotations

from dataclasses import dataclass

import durableq
from durableq.errors import DurableQError, InvalidParameterValue, QueueDoesNotExist

from ..params import Params
from ..urls import Endpoint, queue_name
from ..wording import Worded, word


@dataclass(frozen=True, slots=True)
class Call:
    broker: durableq.Broker
    endpoint: Endpoint
    params: Params

    def queue(self) -> durableq.Queue | durableq.VirtualQueue:
        """The queue the request's QueueUrl names (QueueDoesNotExist if none); ``URL#NAME`` names the
        virtual queue NAME of the queue at URL (the convention of AWS's temporary queue client), which
        refuses the queue's own calls itself (UnsupportedOperation)."""
        url = self.params.required("QueueUrl")
        address, _, virtual = url.partition("#")
        try:
            queue = self.broker.get_queue(self.endpoint.library_name(queue_name(address)))
            return queue.virtual_queue(virtual) if virtual else queue
        except InvalidParameterValue as exc:  # not even a queue name: no queue, as SQS answers
            raise QueueDoesNotExist(f"queue URL {url!r} names no queue: {exc.message}") from exc

    def url(self, name: str) -> str:
        return self.endpoint.queue_url(name)

    def named_queue(self) -> str | None:
        """The queue the request names (by URL or by name), for SQS's error texts."""
        url, name = self.params.raw("QueueUrl"), self.params.raw("QueueName")
        if isinstance(url, str):
            address, _, virtual = url.partition("#")
            return f"{queue_name(address)}#{virtual}" if virtual else queue_name(address)
        return name if isinstance(name, str) else None

    def word(self, action: str, error: DurableQError, entry: Params | None = None) -> Worded:
        """SQS's code and text for a library error of this request (or of one of its batch ``entry``)."""
        request = self.params if entry is None else entry
        worded = word(error, request.raw, action=action, queue=self.named_queue(), entry=entry is not None)
        return self.endpoint.unprefixed(worded)
