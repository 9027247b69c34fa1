"""What an action gets: the broker, how to name queues for this client, and the request members."""

from __future__ import annotations

from dataclasses import dataclass

import durableq

from ..params import Params
from ..urls import Endpoint, queue_name


@dataclass(frozen=True, slots=True)
class Call:
    broker: durableq.Broker
    endpoint: Endpoint
    params: Params

    def queue(self) -> durableq.Queue:
        """The queue the request's QueueUrl names (QueueDoesNotExist from the library if none)."""
        return self.broker.get_queue(queue_name(self.params.required("QueueUrl")))

    def url(self, name: str) -> str:
        return self.endpoint.queue_url(name)
