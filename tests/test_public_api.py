"""The public surface: exported names, the error tree, docstrings and type hints."""

from __future__ import annotations

import inspect
import typing

import pytest

import durableq
import durableq.errors

SPEC_ERRORS = [
    "QueueDoesNotExist",
    "QueueNameExists",
    "InvalidParameterValue",
    "InvalidAttributeName",
    "InvalidAttributeValue",
    "InvalidMessageContents",
    "MissingParameter",
    "ReceiptHandleIsInvalid",
    "MessageNotInflight",
    "OverLimit",
    "EmptyBatchRequest",
    "TooManyEntriesInBatchRequest",
    "BatchEntryIdsNotDistinct",
    "InvalidBatchEntryId",
    "BatchRequestTooLong",
    "ResourceNotFoundException",
    "UnsupportedOperation",
]


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in vars(durableq) if not name.startswith("_")} - {"annotations"}
    modules = {name for name in public if inspect.ismodule(getattr(durableq, name))}
    assert set(durableq.__all__) == public - modules | {"errors"}
    assert sorted(durableq.__all__) == durableq.__all__


@pytest.mark.parametrize("name", SPEC_ERRORS)
def test_every_spec_error_has_a_stable_code(name: str) -> None:
    error = getattr(durableq.errors, name)
    assert getattr(durableq, name) is error
    assert issubclass(error, durableq.DurableQError)
    assert error.code == name
    instance = error("what was wrong; what is allowed")
    assert instance.code == name and instance.message == "what was wrong; what is allowed"


def test_database_errors_are_durableq_errors() -> None:
    for name in (
        "DatabaseLocked",
        "DatabaseCorrupt",
        "DatabaseReadOnly",
        "DatabaseFull",
        "NotADurableQDatabase",
        "SchemaVersionTooNew",
    ):
        error = getattr(durableq, name)
        assert issubclass(error, durableq.DatabaseError) and issubclass(error, durableq.DurableQError)
        assert error.code == name


@pytest.mark.parametrize("cls", [durableq.Broker, durableq.Queue])
def test_public_methods_have_docstrings_and_type_hints(cls: type) -> None:
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_"):
            continue
        hints = typing.get_type_hints(member)
        assert "return" in hints, f"{cls.__name__}.{name} has no return type"
        parameters = [
            p for p in inspect.signature(member).parameters if p != "self" and not p.startswith("*")
        ]
        assert all(p in hints for p in parameters), f"{cls.__name__}.{name} lacks parameter types"
        assert member.__doc__, f"{cls.__name__}.{name} has no docstring"


def test_open_has_the_spec_signature() -> None:
    parameters = inspect.signature(durableq.open).parameters
    assert list(parameters)[:3] == ["path", "clock", "durability"]
    assert parameters["clock"].default is None and parameters["durability"].default == "full"
    assert parameters["clock"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_package_is_typed() -> None:
    from importlib.resources import files

    assert files("durableq").joinpath("py.typed").is_file()
