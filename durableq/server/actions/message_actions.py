"""Message actions: send, receive, delete and change visibility, one at a time and in batches."""

from __future__ import annotations

from typing import Any

from durableq import BatchResult, Message, Queue, SendEntry, VirtualQueue

from ..errors import legacy_code
from ..message_format import ReceiveView, attributes_in, send_digests, trace_header_in
from ..params import Params
from ..wording import failure_error
from .call import Call


def _message(params: Params) -> tuple[dict[str, Any], dict[str, str]]:
    """The library's keywords for a SendMessage (or batch entry), and the digests its result reports."""
    attributes = attributes_in(params.mapping("MessageAttributes"))
    trace_header = trace_header_in(params.mapping("MessageSystemAttributes"))
    keywords = {
        "body": params.raw("MessageBody"),
        "delay_seconds": params.integer("DelaySeconds"),
        "attributes": attributes,
        "group_id": params.raw("MessageGroupId"),
        "deduplication_id": params.raw("MessageDeduplicationId"),
        "trace_header": trace_header,
    }
    return keywords, send_digests(attributes, trace_header)


def send_message(call: Call) -> dict[str, Any]:
    queue = call.queue()
    call.params.required("MessageBody")
    keywords, digests = _message(call.params)
    sent = queue.send(**keywords, offload=False)  # over the size limit stays refused on the wire
    return _sent(
        {"MD5OfMessageBody": sent.md5_of_body, **digests, "MessageId": sent.message_id}, sent.sequence_number
    )


def send_message_batch(call: Call) -> dict[str, Any]:
    queue = call.queue()
    entries, digests = [], {}
    for params in call.params.entries("Entries"):
        entry_id = params.raw("Id")  # checked by the library (InvalidBatchEntryId), whatever its type
        keywords, digest = _message(params)
        if isinstance(entry_id, str):
            digests[entry_id] = digest
        entries.append(SendEntry(entry_id, **keywords))
    outcome = queue.send_batch(entries, offload=False)
    successful = [
        _sent(
            {"Id": s.id, "MessageId": s.message_id, "MD5OfMessageBody": s.md5_of_body, **digests[s.id]},
            s.sequence_number,
        )
        for s in outcome.successful
    ]
    return {"Successful": successful, "Failed": _failed(call, "SendMessageBatch", outcome)}


def _sent(result: dict[str, Any], sequence_number: str | None) -> dict[str, Any]:
    # Members in the order of the API model (the query protocol writes elements in this order).
    if sequence_number is not None:  # FIFO queues only
        result["SequenceNumber"] = sequence_number
    return result


def receive_request(call: Call) -> tuple[Queue | VirtualQueue, dict[str, Any], ReceiveView]:
    """The queue, the library's keywords and the view of a ReceiveMessage (the endpoint awaits it)."""
    queue = call.queue()
    params = call.params
    view = ReceiveView(params, call.endpoint)
    max_messages = params.integer("MaxNumberOfMessages")
    keywords = {
        "max_messages": 1 if max_messages is None else max_messages,
        "visibility_timeout": params.integer("VisibilityTimeout"),
        "wait_time": params.integer("WaitTimeSeconds"),
        "attempt_id": params.text("ReceiveRequestAttemptId"),  # the library uses it on FIFO queues only
    }
    return queue, keywords, view


def received(view: ReceiveView, messages: list[Message]) -> dict[str, Any]:
    """The result members of a ReceiveMessage.  A message this server cannot open (``unreadable``: sealed
    under a key its keyring lacks) has no form on the wire: it is left out, and stays in flight until
    its visibility timeout ends, counted by the queue's redrive policy, while the others are returned; a
    receive that got only such messages answers with the error of the first (KMS.AccessDeniedException,
    ...), so that it never looks empty."""
    readable = [m for m in messages if m.unreadable is None]
    if messages and not readable:
        error = messages[0].unreadable
        assert error is not None
        raise type(error)(error.message)
    return {"Messages": [view.message(m) for m in readable]} if readable else {}


def receive_message(call: Call) -> dict[str, Any]:
    queue, keywords, view = receive_request(call)
    return received(view, queue.receive(**keywords))


def delete_message(call: Call) -> dict[str, Any]:
    call.queue().delete(call.params.required("ReceiptHandle"))
    return {}


def delete_message_batch(call: Call) -> dict[str, Any]:
    queue = call.queue()
    entries = [(e.raw("Id"), e.raw("ReceiptHandle")) for e in call.params.entries("Entries")]
    return _batch(call, "DeleteMessageBatch", queue.delete_batch(entries))


def change_message_visibility(call: Call) -> dict[str, Any]:
    params = call.params
    timeout = params.integer("VisibilityTimeout", required=True)
    call.queue().change_visibility(params.required("ReceiptHandle"), timeout)  # type: ignore[arg-type]
    return {}


def change_message_visibility_batch(call: Call) -> dict[str, Any]:
    queue = call.queue()
    # Values go to the library as given: it checks each entry and fails only that entry.
    entries: list[tuple[Any, Any, Any]] = [
        (e.raw("Id"), e.raw("ReceiptHandle"), e.integer("VisibilityTimeout"))
        for e in call.params.entries("Entries")
    ]
    return _batch(call, "ChangeMessageVisibilityBatch", queue.change_visibility_batch(entries))


def _batch(call: Call, action: str, outcome: BatchResult) -> dict[str, Any]:
    return {
        "Successful": [{"Id": entry.id} for entry in outcome.successful],
        "Failed": _failed(call, action, outcome),
    }


def _failed(call: Call, action: str, outcome: BatchResult) -> list[dict[str, Any]]:
    """The failed entries, each in SQS's words."""
    entries = {entry.raw("Id"): entry for entry in call.params.entries("Entries")}
    failed = []
    for failure in outcome.failed:
        worded = call.word(action, failure_error(failure), entries.get(failure.id, Params({})))
        failed.append(
            {
                "Id": failure.id,
                "SenderFault": failure.sender_fault,
                "Code": legacy_code(worded.code),
                "Message": worded.message,
            }
        )
    return failed


ACTIONS = {
    "SendMessage": send_message,
    "SendMessageBatch": send_message_batch,
    "ReceiveMessage": receive_message,
    "DeleteMessage": delete_message,
    "DeleteMessageBatch": delete_message_batch,
    "ChangeMessageVisibility": change_message_visibility,
    "ChangeMessageVisibilityBatch": change_message_visibility_batch,
}
