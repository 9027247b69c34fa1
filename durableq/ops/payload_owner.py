"""Which database a payload store serves: one, named in a marker file in the store's folder.

A store removes the files that no row of its database names (orphans: a send cut between writing
its file and committing its row).  A second database given the same folder would take the first
one's files for orphans and sweep them, so a store serves one database: the first to use it writes
the database's identity (a random id a migration put in the database) into :data:`MARKER`, and a
store whose marker names another database is refused, before any file is written or removed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidParameterValue

#: The marker file in the store's folder (not a payload's name: no sweep ever takes it).
MARKER = ".durableq-database"
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Owner:
    """The database a store's folder must name, checked once per folder (by its device and inode)."""

    def __init__(self, identity: Callable[[], str]) -> None:
        self._identity = identity
        self._checked: tuple[int, int] | None = None

    def check(self, root: int, where: Path) -> None:
        """Raise unless the folder open at descriptor ``root`` serves this database (marking a folder
        that names none, as the first database to use it)."""
        found = os.fstat(root)
        if self._checked == (found.st_dev, found.st_ino):
            return
        ours = self._identity()
        named = _read(root)
        if named is None:
            named = _mark(root, ours)
        if named != ours:
            raise InvalidParameterValue(
                f"the payload folder {where} serves another database (its {MARKER} names {named[:40]!r}): "
                "two databases sharing one folder would sweep each other's payloads; give each database "
                "a payload_dir of its own"
            )
        self._checked = (found.st_dev, found.st_ino)


def _read(root: int) -> str | None:
    """What the marker names; None when there is none, or it names nothing (an empty marker: a
    process cut between creating and writing it, before markers were written whole)."""
    try:
        fd = os.open(MARKER, _READ, dir_fd=root)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, 256).decode("ascii", "replace").strip() or None
    finally:
        os.close(fd)


def _mark(root: int, identity: str) -> str:
    """Write the marker whole, or not at all: the identity goes into a file of this process's own,
    which becomes the marker by ``link`` (atomic, and refused when a marker exists) or, over an
    empty one, by ``rename``.  Another process never reads a marker half written, and a process
    killed half-way leaves no marker (at worst its own copy, which no sweep takes: not a payload's
    name).  Returns what the marker names: ``identity``, or what another process wrote first."""
    draft = f"{MARKER}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(draft, _CREATE, 0o600, dir_fd=root)
    try:
        try:
            os.write(fd, f"{identity}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(draft, MARKER, src_dir_fd=root, dst_dir_fd=root, follow_symlinks=False)
        except FileExistsError:
            named = _read(root)
            if named is not None:
                return named
            os.rename(draft, MARKER, src_dir_fd=root, dst_dir_fd=root)  # over an empty marker
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(draft, dir_fd=root)
    os.fsync(root)
    return identity
