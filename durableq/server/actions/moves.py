"""Message move tasks: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask (queues by ARN)."""

from __future__ import annotations

from typing import Any

from durableq import MoveTask
from durableq.errors import InvalidParameterValue

from .call import Call

#: ListMessageMoveTasks returns 1 task unless MaxResults asks for up to 10 (SQS's paging).
DEFAULT_TASKS, MAX_TASKS = 1, 10


def start_message_move_task(call: Call) -> dict[str, Any]:
    params, endpoint = call.params, call.endpoint
    source = endpoint.name_from_arn(params.required("SourceArn"), "SourceArn")
    destination_arn = params.text("DestinationArn")
    destination = (
        None if destination_arn is None else endpoint.name_from_arn(destination_arn, "DestinationArn")
    )
    task = call.broker.start_message_move(source, destination, params.integer("MaxNumberOfMessagesPerSecond"))
    return {"TaskHandle": task.task_handle}


def list_message_move_tasks(call: Call) -> dict[str, Any]:
    params = call.params
    source = call.endpoint.name_from_arn(params.required("SourceArn"), "SourceArn")
    limit = params.integer("MaxResults")
    if limit is not None and not 1 <= limit <= MAX_TASKS:
        raise InvalidParameterValue(f"MaxResults must be from 1 to {MAX_TASKS}; got {limit}")
    tasks = call.broker.list_message_moves(source)[: limit or DEFAULT_TASKS]
    return {"Results": [_task(call, task) for task in tasks]}


def cancel_message_move_task(call: Call) -> dict[str, Any]:
    task = call.broker.cancel_message_move(call.params.required("TaskHandle"))
    return {"ApproximateNumberOfMessagesMoved": task.moved}


def _task(call: Call, task: MoveTask) -> dict[str, Any]:
    """A task's entry, its members in the order of the API model."""
    arn = call.endpoint.arn
    wire: dict[str, Any] = {
        # SQS gives the handle of a running task only: the one that can be cancelled.
        "TaskHandle": task.task_handle if task.status == "RUNNING" else None,
        "Status": task.status,
        "SourceArn": arn(task.source),
        "DestinationArn": None if task.destination is None else arn(task.destination),
        "MaxNumberOfMessagesPerSecond": task.max_per_second,
        "ApproximateNumberOfMessagesMoved": task.moved,
        "ApproximateNumberOfMessagesToMove": task.to_move,
        "FailureReason": task.failure_reason,
        "StartedTimestamp": int(task.started_at.timestamp() * 1000),
    }
    return {name: value for name, value in wire.items() if value is not None}


ACTIONS = {
    "StartMessageMoveTask": start_message_move_task,
    "ListMessageMoveTasks": list_message_move_tasks,
    "CancelMessageMoveTask": cancel_message_move_task,
}
