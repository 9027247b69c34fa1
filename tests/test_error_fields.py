"""Errors carry what they are about as data (durableq/errors.py): the fields, the message formatted
from a template, the same message with the library's names spelled another way, and pickling."""

from __future__ import annotations

import pickle

import durableq
from durableq.errors import InvalidParameterValue, Reason


def test_a_plain_message_still_makes_an_error() -> None:
    error = durableq.QueueDoesNotExist("queue 'x' does not exist")
    assert (error.code, error.message, str(error)) == (
        "QueueDoesNotExist",
        "queue 'x' does not exist",
        error.message,
    )
    assert error.parameter is None and error.reason is None and error.names == ()
    assert error.spelled({"x": "y"}) == error.message  # a plain message is never respelled


def test_a_template_is_formatted_from_the_fields_and_spelled_on_demand() -> None:
    error = InvalidParameterValue(
        template="{parameter} must be from {low} to {high} {unit}; got {value!r}; pass {fifo=True}",
        parameter="delay_seconds",
        value="{delay_seconds}",
        low=0,
        high=900,
        unit="seconds",
        reason=Reason.RANGE,
    )
    assert (
        error.message == "delay_seconds must be from 0 to 900 seconds; got '{delay_seconds}'; pass fifo=True"
    )
    assert error.spelled({"delay_seconds": "--delay", "fifo=True": "--fifo"}) == (
        "--delay must be from 0 to 900 seconds; got '{delay_seconds}'; pass --fifo"  # the value stays
    )
    assert (error.value, error.low, error.high, error.reason) == ("{delay_seconds}", 0, 900, "range")


def test_names_and_choices_are_listed() -> None:
    error = durableq.QueueNameExists(
        template="({names}); first {names[0]}; one of {choices}",
        names=["visibility_timeout", "delay_seconds"],
        choices=("a", "b"),
    )
    assert error.message == "(visibility_timeout, delay_seconds); first visibility_timeout; one of a, b"
    assert error.spelled({"delay_seconds": "--delay"}) == (
        "(visibility_timeout, --delay); first visibility_timeout; one of a, b"
    )


def test_errors_pickle_with_their_fields() -> None:
    error = InvalidParameterValue(
        template="{parameter} is {value!r}", parameter="p", value=3, reason=Reason.TYPE
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidParameterValue and copy.message == "p is 3"
    assert (copy.parameter, copy.value, copy.reason) == ("p", 3, Reason.TYPE)
    assert copy.spelled({"p": "--p"}) == "--p is 3"


def test_library_errors_carry_their_data(broker: durableq.Broker) -> None:
    queue = broker.create_queue("jobs")
    try:
        queue.send("x", delay_seconds=901)
    except InvalidParameterValue as exc:
        error = exc
    assert (error.parameter, error.value, error.low, error.high, error.unit, error.reason) == (
        "delay_seconds",
        901,
        0,
        900,
        "seconds",
        Reason.RANGE,
    )
    try:
        broker.create_queue("jobs", visibility_timeout=5, delay_seconds=1)
    except durableq.QueueNameExists as exc:
        exists = exc
    assert exists.names == ("visibility_timeout", "delay_seconds") and exists.queue == "jobs"


def test_a_failed_batch_entry_carries_its_error(queue: durableq.Queue) -> None:
    result = queue.send_batch([durableq.SendEntry("late", "x", delay_seconds=901)])
    (failure,) = result.failed
    assert failure.error is not None and (failure.code, failure.message) == (
        failure.error.code,
        failure.error.message,
    )
    assert (failure.error.parameter, failure.error.value, failure.error.high) == ("delay_seconds", 901, 900)
