"""A database that lives as long as a block: the test double's and ``durableq serve --ephemeral``'s.

It is a fresh SQLite file in a new private folder (with its payload store beside it); the folder
and everything in it are removed when the block ends, however it ends: an exception, Ctrl-C, or
the SIGTERM that :func:`durableq.server.run` turns into a normal return.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The file's name inside its temporary folder.
FILE_NAME = "queues.db"


@contextmanager
def temporary_database(prefix: str = "durableq-") -> Iterator[Path]:
    """The path of a database file that does not exist yet, in a folder removed when the block ends.

    ``durableq.open`` (or ``serve``) creates the file; nothing else may be kept in the folder.
    """
    with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as folder:
        yield Path(folder) / FILE_NAME


__all__ = ["FILE_NAME", "temporary_database"]
