"""``OpenOptions``: how a broker was opened, as one value that travels whole.

:func:`durableq.open` checks its arguments into one, the broker keeps it
(``Broker.options``), and whatever opens the same database again (a worker
process) reopens from it with :func:`durableq.reopen`: so it cannot keep the
file and drop the keyring, the payload store, the busy timeout or the clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import limits, validation
from .engines.urls import postgres_url, redacted
from .errors import InvalidParameterValue
from .keyring import Keyring


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class OpenOptions:
    """Everything :func:`durableq.open` was given, checked: the database (a SQLite file's path or a
    PostgreSQL URL), its durability, the busy timeout, the keyring (None: none), the payload store's
    folder (None: the default, beside a SQLite file), the clock and, on PostgreSQL, the schema of
    durableq's tables (None on SQLite).

    It pickles, so a worker process can be sent one: a keyring travels as its file's path (the other
    process reads the same file; no key leaves it), the clock by reference, which a module-level
    function allows and a lambda does not.  A picklable fake clock arrives as a copy, which no longer
    moves with the original.
    """

    location: str
    durability: str = limits.DEFAULT_DURABILITY
    busy_timeout: float = limits.DEFAULT_BUSY_TIMEOUT
    keyring: Keyring | None = None
    payload_dir: Path | None = None
    clock: Callable[[], float] = field(default=time.time)
    schema: str | None = None

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        durability: str = limits.DEFAULT_DURABILITY,
        busy_timeout: float = limits.DEFAULT_BUSY_TIMEOUT,
        keyring: str | os.PathLike[str] | Keyring | None = None,
        payload_dir: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] | None = None,
        schema: str | None = None,
    ) -> None:
        validation.choice("durability", durability, limits.DURABILITY_LEVELS)
        if clock is not None and not callable(clock):
            raise InvalidParameterValue("clock must be a callable returning seconds since the epoch")
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, (int, float))
            or not busy_timeout >= 0
        ):
            raise InvalidParameterValue(
                f"busy_timeout must be a number of seconds >= 0; got {busy_timeout!r}"
            )
        if not isinstance(location, (str, os.PathLike)):
            raise InvalidParameterValue(
                f"path must be a file path or a postgresql:// URL; got {type(location).__name__}"
            )
        if payload_dir is not None and (
            not isinstance(payload_dir, (str, os.PathLike)) or not os.fspath(payload_dir)
        ):
            given = type(payload_dir).__name__ if not isinstance(payload_dir, str) else "''"
            raise InvalidParameterValue(f"payload_dir must be a folder path; got {given}")
        if postgres_url(os.fspath(location)) if isinstance(location, (str, os.PathLike)) else False:
            schema = validation.schema_name(limits.DEFAULT_POSTGRES_SCHEMA if schema is None else schema)
        elif schema is not None:
            raise InvalidParameterValue(
                f"schema applies to a PostgreSQL database; a SQLite file holds one durableq (got {schema!r})"
            )
        ring = keyring if isinstance(keyring, Keyring) or keyring is None else Keyring(keyring)
        put = object.__setattr__  # frozen: set once, here
        # Paths absolute, as they name things now: a process whose working folder changes later (a
        # daemon's does) must go on opening the same file, and so must the worker processes it starts.
        put(self, "location", _absolute(location))
        put(self, "durability", durability)
        put(self, "busy_timeout", float(busy_timeout))
        put(self, "keyring", ring)
        put(self, "payload_dir", None if payload_dir is None else Path(_absolute(payload_dir)))
        put(self, "clock", time.time if clock is None else clock)
        put(self, "schema", schema)

    def __repr__(self) -> str:
        # Never the generated one: a PostgreSQL URL's password must not show (nor in a log line).
        return (
            f"OpenOptions({redacted(self.location)!r}, durability={self.durability!r}, "
            f"busy_timeout={self.busy_timeout!r}, keyring={self.keyring!r}, "
            f"payload_dir={self.payload_dir!r}, clock={self.clock!r}, schema={self.schema!r})"
        )

    def _compared(self) -> tuple[object, ...]:
        # A keyring is its file: two Keyring objects of one path open the same keys.
        ring = None if self.keyring is None else self.keyring.path
        return (
            self.location,
            self.durability,
            self.busy_timeout,
            ring,
            self.payload_dir,
            self.clock,
            self.schema,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpenOptions):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __reduce__(self) -> tuple[Any, ...]:
        # The keyring as its path: a Keyring holds a lock and the keys it read, neither of which travels.
        return _rebuild, self._compared()


def _absolute(path: str | os.PathLike[str]) -> str:
    """A SQLite file's (or a folder's) path made absolute; a PostgreSQL URL as it is."""
    text = os.fspath(path)
    if not isinstance(text, str) or postgres_url(text):
        return str(text)
    if "\x00" in text:
        raise InvalidParameterValue(f"path {text[:200]!r} is not a usable file name (a NUL byte)")
    return os.path.abspath(text)


def _rebuild(
    location: str,
    durability: str,
    busy_timeout: float,
    keyring: Path | None,
    payload_dir: Path | None,
    clock: Callable[[], float],
    schema: str | None = None,
) -> OpenOptions:
    """An unpickled :class:`OpenOptions` (checked again, as any)."""
    return OpenOptions(
        location,
        durability=durability,
        busy_timeout=busy_timeout,
        keyring=keyring,
        payload_dir=payload_dir,
        clock=clock,
        schema=schema,
    )
