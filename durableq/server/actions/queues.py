"""Queue actions: create, find, list, delete, attributes, purge, dead-letter sources, tags, permissions."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from durableq import limits
from durableq.errors import InvalidParameterValue, Reason

from ..params import Params, missing
from ..queue_attributes import from_settings, to_settings
from .call import Call

#: ListQueues returns at most this many URLs, also without MaxResults (as SQS does).
MAX_LIST_RESULTS = 1_000


def create_queue(call: Call) -> dict[str, Any]:
    name = call.params.required("QueueName")
    settings = to_settings(call.params.mapping("Attributes"), call.endpoint)
    fifo = settings.pop("fifo", False)
    queue = call.broker.create_queue(
        call.endpoint.library_name(name), fifo=fifo, tags=call.params.mapping("tags") or None, **settings
    )
    return {"QueueUrl": call.url(queue.name)}


def get_queue_url(call: Call) -> dict[str, Any]:
    queue = call.broker.get_queue(call.endpoint.library_name(call.params.required("QueueName")))
    return {"QueueUrl": call.url(queue.name)}


def list_queues(call: Call) -> dict[str, Any]:
    prefix = call.endpoint.library_name(call.params.text("QueueNamePrefix") or "")
    names = [name for name in call.broker.list_queues(prefix) if call.endpoint.owns(name)]
    return _page(call, names, "QueueUrls")


def delete_queue(call: Call) -> dict[str, Any]:
    call.broker.delete_queue(call.queue().name)
    return {}


def get_queue_attributes(call: Call) -> dict[str, Any]:
    queue = call.queue()
    names = call.params.texts("AttributeNames")
    attributes = from_settings(queue.attributes(), names, call.endpoint, queue.stats)
    return {"Attributes": attributes} if attributes else {}


def set_queue_attributes(call: Call) -> dict[str, Any]:
    queue = call.queue()
    queue.set_attributes(**to_settings(call.params.mapping("Attributes"), call.endpoint))
    return {}


def purge_queue(call: Call) -> dict[str, Any]:
    call.queue().purge()
    return {}


def list_dead_letter_source_queues(call: Call) -> dict[str, Any]:
    sources = call.broker.dead_letter_source_queues(call.queue().name)
    return _page(call, sources, "queueUrls", required=True)


def tag_queue(call: Call) -> dict[str, Any]:
    queue = call.queue()
    tags = call.params.mapping("Tags")
    if not tags:  # a required member of the request: SQS refuses an empty one too
        raise missing("Tags")
    queue.tag(**tags)
    return {}


def untag_queue(call: Call) -> dict[str, Any]:
    queue = call.queue()
    keys = call.params.texts("TagKeys")
    if not keys:
        raise InvalidParameterValue(
            f"Tag keys must be between 1 and {limits.MAX_TAG_KEY_LENGTH} characters in length.",
            parameter="TagKeys",
            reason=Reason.MISSING,
        )
    queue.untag(*keys)
    return {}


def list_queue_tags(call: Call) -> dict[str, Any]:
    tags = call.queue().tags()
    return {"Tags": tags} if tags else {}


def add_permission(call: Call) -> dict[str, Any]:
    queue = call.queue()
    params = call.params
    queue.add_permission(
        params.required("Label"),
        params.texts("AWSAccountIds"),
        params.texts("Actions"),
        resource=call.endpoint.arn(queue.name),
    )
    return {}


def remove_permission(call: Call) -> dict[str, Any]:
    call.queue().remove_permission(call.params.required("Label"))
    return {}


def _page(call: Call, names: list[str], member: str, *, required: bool = False) -> dict[str, Any]:
    """One page of queue URLs: ``NextToken`` is the last name given, so pages stay right while queues change.

    An empty page omits ``member`` unless the API model marks it ``required``
    (``ListDeadLetterSourceQueues``' ``queueUrls``), as SQS does.
    """
    params: Params = call.params
    token = params.text("NextToken")
    if token:
        after = _decode(token)
        names = [name for name in names if name > after]
    limit = params.integer("MaxResults")
    if limit is not None and not 1 <= limit <= MAX_LIST_RESULTS:
        raise InvalidParameterValue(f"MaxResults must be from 1 to {MAX_LIST_RESULTS}; got {limit}")
    page = names[: limit or MAX_LIST_RESULTS]
    result: dict[str, Any] = {member: [call.url(name) for name in page]} if page or required else {}
    if limit is not None and len(names) > limit:
        result["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode("ascii")
    return result


def _decode(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode("ascii")).decode()
    except (binascii.Error, ValueError) as exc:
        raise InvalidParameterValue(f"NextToken {token!r} is not a token this server gave") from exc


ACTIONS = {
    "CreateQueue": create_queue,
    "GetQueueUrl": get_queue_url,
    "ListQueues": list_queues,
    "DeleteQueue": delete_queue,
    "GetQueueAttributes": get_queue_attributes,
    "SetQueueAttributes": set_queue_attributes,
    "PurgeQueue": purge_queue,
    "ListDeadLetterSourceQueues": list_dead_letter_source_queues,
    "TagQueue": tag_queue,
    "UntagQueue": untag_queue,
    "ListQueueTags": list_queue_tags,
    "AddPermission": add_permission,
    "RemovePermission": remove_permission,
}
