"""Formatting, in one place: ``--json`` for scripts, tables and text for people."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click

import durableq
from durableq.text import printable

F = TypeVar("F", bound=Callable[..., Any])

#: How much of a body a table shows; ``--json`` always gives all of it.
BODY_PREVIEW = 60


def json_option(command: F) -> F:
    """The ``--json`` flag every printing command has (an option of the command itself)."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON (one line) for scripts.")(command)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dataclasses as objects (their public fields), times in ISO 8601,
    bytes in base64."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            if f.name == "_text" and isinstance(value, durableq.Message):
                # A payload stored outside is not read into the JSON: its body is null (see payload_size);
                # so is an unreadable message's (see "unreadable").
                readable = value.payload_size is None and value.unreadable is None
                data["body"] = value.body if readable else None
            elif not f.name.startswith("_"):
                data[f.name] = jsonable(getattr(value, f.name))
        return data
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Path):
        return str(value)
    return value


def emit(as_json: bool, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as JSON, or else ``text`` (a callable is only formatted when needed)."""
    if as_json:
        click.echo(json.dumps(jsonable(data), ensure_ascii=False))
    else:
        click.echo(text() if callable(text) else text)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned text table; columns of numbers align right."""
    values = [list(row) for row in rows]
    cells = [[_cell(v) for v in row] for row in values]
    columns = range(len(headers))
    right = [bool(values) and all(isinstance(row[i], (int, float)) for row in values) for i in columns]
    widths = [max([len(headers[i]), *(len(row[i]) for row in cells)]) for i in columns]
    return "\n".join(_line(row, widths, right) for row in [list(headers), *cells])


def _line(values: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)]
    return "  ".join(parts).rstrip()


def _cell(value: Any) -> str:
    """A value in a table or a ``name: value`` line, on that line whatever it holds (a refused queue
    name with a line break, an escape sequence in a tag key): ``--json`` has the exact text."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return when(value)
    return printable(value)


def fields(pairs: Iterable[tuple[str, Any]]) -> str:
    """``name: value`` lines with the values aligned."""
    items = [(name, _cell(value)) for name, value in pairs]
    width = max((len(name) for name, _ in items), default=0)
    return "\n".join(f"{name + ':':<{width + 1}} {value}" for name, value in items)


def when(moment: datetime | None) -> str:
    """A UTC time to the second."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float) -> str:
    """A short human duration: ``45s``, ``3m 20s``, ``2h 5m``, ``4d 1h``."""
    whole = int(seconds)
    units = (("d", 86_400, "h", 3_600), ("h", 3_600, "m", 60), ("m", 60, "s", 1))
    for unit, size, smaller, smaller_size in units:
        if whole >= size:
            rest = (whole % size) // smaller_size
            return f"{whole // size}{unit}" + (f" {rest}{smaller}" if rest else "")
    return f"{whole}s"


def preview(body: str, width: int = BODY_PREVIEW) -> str:
    """One line of a body for a table."""
    flat = printable(body)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def attribute_text(attributes: Mapping[str, durableq.Attribute]) -> str:
    """Attributes as ``name:Type=value`` (the form ``send --attr`` takes), comma separated."""
    return (
        ", ".join(f"{name}:{a.data_type}={jsonable(a.value)}" for name, a in sorted(attributes.items()))
        or "-"
    )


def message_json(message: durableq.Message | durableq.PeekedMessage) -> dict[str, Any]:
    """A received or peeked message as JSON: the same core fields for both, times in ISO 8601 UTC.

    The library's epoch-millisecond fields (SQS's SentTimestamp and friends) are replaced by their
    ISO 8601 forms (``sent_at``, ``first_received_at``, a peek's ``visible_at``), so every time the
    CLI prints is in one format."""
    data: dict[str, Any] = {
        name: value for name, value in jsonable(message).items() if not name.endswith("_timestamp")
    }
    data["sent_at"] = message.sent_at.isoformat()
    first = message.first_received_at
    data["first_received_at"] = None if first is None else first.isoformat()
    if isinstance(message, durableq.PeekedMessage):
        data["visible_at"] = message.visible_at.isoformat()
    else:
        unreadable = message.unreadable
        data["md5_of_body"] = None if unreadable is not None else message.md5_of_body
        data["unreadable"] = (
            None if unreadable is None else {"code": unreadable.code, "message": unreadable.message}
        )
    return data


def interactive() -> bool:
    """Whether progress bars may draw: stderr is a terminal."""
    return sys.stderr.isatty()


class Progress(Protocol):
    """What a command does with a progress bar."""

    def update(self, n_steps: int) -> None: ...


class _NoBar:
    def update(self, n_steps: int) -> None:
        pass


@contextmanager
def progress(length: int, label: str, enabled: bool) -> Iterator[Progress]:
    """A progress bar on stderr (stdout stays clean for the result) when ``enabled`` and
    stderr is a terminal; else a silent stand-in."""
    if not enabled or length <= 0 or not interactive():
        yield _NoBar()
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar
