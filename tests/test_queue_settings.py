"""The table of queue settings (durableq/queue_settings.py) and what mirrors it by hand agree: the
typed keyword arguments of ``create_queue``, the queue row (``QueueConfig``, the schema) and
``Queue.attributes()``."""

from __future__ import annotations

import dataclasses
import inspect

import durableq
from durableq.engines import schema
from durableq.limits import DEFAULT
from durableq.ops.queue_rows import QueueConfig
from durableq.queue_settings import BY_NAME, KEYWORDS, SETTABLE, SETTINGS

#: Parameters of create_queue that are not queue settings.
_NOT_SETTINGS = {"self", "name", "tags", "sqs_settings"}


def test_create_queue_spells_out_exactly_the_settings_of_the_table() -> None:
    parameters = inspect.signature(durableq.Broker.create_queue).parameters
    spelled = {name: p for name, p in parameters.items() if name not in _NOT_SETTINGS}
    assert set(spelled) == {*KEYWORDS, "fifo"}
    for name, parameter in spelled.items():
        setting = BY_NAME[name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert setting.kind.__name__ in str(parameter.annotation), name
        if setting.settable:  # "not given": compared with an existing queue only when given
            assert parameter.default is DEFAULT, name
        else:
            assert parameter.default == setting.default, name
    # The settings kept only for SQS clients come through **sqs_settings.
    assert parameters["sqs_settings"].kind is inspect.Parameter.VAR_KEYWORD
    assert {s.name for s in SETTABLE if s.sqs_client_only} == {"policy", "fifo_throughput_limit"}


def test_every_setting_has_its_columns_in_the_queue_row() -> None:
    fields = {f.name: f for f in dataclasses.fields(QueueConfig)}
    for setting in SETTINGS:
        for column in setting.stored_in:
            assert column in fields, column
            assert column in schema.queues.c, column
        if not setting.columns:  # a column of its own: of its type
            assert setting.kind.__name__ in str(fields[setting.name].type), setting.name


def test_defaults_ranges_and_choices_are_the_limits(broker: durableq.Broker) -> None:
    standard = broker.create_queue("std").attributes()
    fifo = broker.create_queue("jobs.fifo", fifo=True).attributes()
    for setting in SETTABLE:
        assert (fifo if setting.fifo_only else standard)[setting.name] == setting.default, setting.name
        if setting.low is not None:
            assert setting.high is not None and setting.low <= setting.default <= setting.high  # type: ignore[operator]
        if setting.choices is not None:
            assert setting.default in setting.choices
    assert not any(s.fifo_only for s in SETTABLE if s.name in standard)


def test_attributes_show_the_settings_in_the_order_of_the_table(broker: durableq.Broker) -> None:
    shown = [key for key in broker.create_queue("jobs.fifo", fifo=True).attributes() if key in BY_NAME]
    assert shown == [s.name for s in SETTINGS if not s.fifo_only] + [s.name for s in SETTINGS if s.fifo_only]
