"""Batch requests: entry checks and per-entry results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import DurableQError, InvalidParameterValue
from ..types import BatchFailure, BatchResult, BatchSuccess


def entries_with_ids(entries: object, width: int, shape: str) -> list[tuple[Any, ...]]:
    """Entries as tuples that start with their id; bare entries get their position as id.

    ``width`` is the length of an entry without its id (1 for a receipt
    handle, 2 for a handle and a timeout).
    """
    if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
        raise InvalidParameterValue(f"batch entries must be a list of {shape}; got {type(entries).__name__}")
    result = []
    for position, entry in enumerate(entries):
        if width == 1 and isinstance(entry, str):
            entry = (entry,)
        if not isinstance(entry, tuple) or len(entry) not in (width, width + 1):
            raise InvalidParameterValue(f"batch entry {position} must be {shape}; got {entry!r}")
        result.append(entry if len(entry) == width + 1 else (str(position), *entry))
    return result


def failure(entry_id: str, error: DurableQError) -> BatchFailure:
    return BatchFailure(entry_id, error.code, error.message, error=error)


def each(ids: Sequence[str], action: Callable[[int], object]) -> BatchResult:
    """Run ``action`` for every entry position; a durableq error fails that entry only."""
    results: list[DurableQError | None] = []
    for position in range(len(ids)):
        try:
            action(position)
        except DurableQError as exc:
            results.append(exc)
        else:
            results.append(None)
    return outcomes(ids, results)


def outcomes(ids: Sequence[str], results: Sequence[DurableQError | None]) -> BatchResult:
    """The batch result of per-entry outcomes: an error, or None for success."""
    successful = [BatchSuccess(entry_id) for entry_id, error in zip(ids, results) if error is None]
    failed = [failure(entry_id, error) for entry_id, error in zip(ids, results) if error is not None]
    return BatchResult(successful, failed)
