"""The payload store's folder on disk: where it may be, the names of its files, and the only ways they
are made, opened, found and removed.

The store touches only files it made, inside its own folder, by names it recognises:

- **Its layout, nothing else.**  A payload named ``ABCD…`` (32 lowercase hex digits, :func:`new_ref`)
  is the file ``AB/ABCD…``; one being written is ``tmp/ABCD….partial``.  Other files and folders, names
  in the wrong shard, folders below the shards: none is ever opened or removed, so a store that shares
  its folder with other files (a home folder, say) leaves them be.
- **No links.**  Every folder and file is opened relative to its parent's descriptor with
  ``O_NOFOLLOW``, so a symbolic link planted in the store, or swapped in while it works, leads nowhere;
  a file is removed only when ``lstat`` says it is a regular file, and a removal never follows a link.
- **A private folder.**  The store creates its folder mode 0700.  An existing one must be a folder, not
  a link to one, owned by this process's user and closed to group and others: checked when the broker
  opens and again (on the open folder) at every use.  It must not hold the database either (a SQLite
  file's folder, or one above it): a store is a folder of its own.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .. import limits
from ..engines.files import fsync_path
from ..errors import DatabaseError, DatabaseFull, DatabaseReadOnly, InvalidParameterValue, MessageCorrupt
from .payload_owner import Owner

log = logging.getLogger(__name__)

_REF = re.compile(r"[0-9a-f]{32}")
_SHARD = re.compile(r"[0-9a-f]{2}")
_TMP = "tmp"
_PARTIAL = ".partial"
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NOT_ALLOWED = {errno.EROFS, errno.EACCES, errno.EPERM}


def new_ref() -> str:
    """A new payload's name (its file's name, and ``payload_ref`` of its row)."""
    return secrets.token_hex(16)


def is_ref(name: object) -> bool:
    """Is ``name`` a payload's name as :func:`new_ref` makes them (and nothing else)?"""
    return isinstance(name, str) and _REF.fullmatch(name) is not None


def location(payload_dir: str | os.PathLike[str] | None, database: Path | None) -> Path | None:
    """The store's folder for a broker on the SQLite file ``database`` (None: a PostgreSQL database):
    ``payload_dir``, else ``DATABASE.payloads`` (PostgreSQL has no default).  InvalidParameterValue if
    it holds the database, or exists and is not a private folder of this user."""
    if payload_dir is None:
        if database is None:
            return None
        root = Path(f"{database}.payloads")
    elif not isinstance(payload_dir, (str, os.PathLike)) or not os.fspath(payload_dir):
        given = type(payload_dir).__name__ if not isinstance(payload_dir, str) else "''"
        raise InvalidParameterValue(f"payload_dir must be a folder path; got {given}")
    else:
        root = Path(payload_dir)
    if database is not None:
        _apart_from(root, database)
    try:
        found = os.lstat(root)
    except FileNotFoundError:
        return root  # made (mode 0700) when the first payload is stored
    except (OSError, ValueError) as exc:
        raise InvalidParameterValue(f"the payload store {str(root)[:200]!r} cannot be used: {exc}") from None
    _check_private(root, found)
    return root


def _apart_from(root: Path, database: Path) -> None:
    """Refuse a store that is the database file, its folder, or a folder above it."""
    try:
        folder, file = Path(os.path.realpath(root)), Path(os.path.realpath(database))
    except (OSError, ValueError):  # a path no file system takes: opening the database says so
        return
    if folder == file:
        raise InvalidParameterValue(
            f"the payload store {root} is the database file {database}; give a folder of its own "
            f"(by default {database}.payloads, beside the file)"
        )
    if folder in file.parents:
        raise InvalidParameterValue(
            f"the payload store {root} holds the database {database} (it is the database's folder or "
            f"one above it); give a folder of its own, such as the default {database}.payloads"
        )


def _check_private(root: Path, found: os.stat_result) -> None:
    """Refuse a store folder that is a link, not a folder, another user's, or open to others."""
    if stat.S_ISLNK(found.st_mode):
        raise InvalidParameterValue(
            f"the payload store {root} is a symbolic link, which the store never follows (its sweep "
            "removes files); give the folder it points to, or remove the link"
        )
    if not stat.S_ISDIR(found.st_mode):
        raise InvalidParameterValue(
            f"the payload store {root} is not a folder; give a folder of its own (durableq makes it, "
            "mode 700)"
        )
    if found.st_uid != os.geteuid():
        raise InvalidParameterValue(
            f"the payload store {root} belongs to user {found.st_uid}, not to this process's user "
            f"{os.geteuid()}; a store is private to the user that runs its brokers: chown it, or give "
            "another folder"
        )
    mode = stat.S_IMODE(found.st_mode)
    if mode & 0o077:
        raise InvalidParameterValue(
            f"the payload store {root} is open to group or others (mode {mode:o}); it must be private "
            f"to its owner: chmod 700 {root}, or give a new folder (durableq makes it, mode 700)"
        )


class Folder:
    """The store's folder at ``root``: opened afresh (and checked) by every operation, which then works
    only relative to the descriptors of its folders."""

    def __init__(self, root: Path, owner: Owner | None = None) -> None:
        self.root = root
        self._owner = owner  # the database the folder must serve (payload_owner.py)

    def exists(self) -> bool:
        """Is there anything at the root (a link too: using it says why it is refused)?"""
        return os.path.lexists(self.root)

    def path(self, ref: str) -> Path:
        """Where payload ``ref``'s file is (for messages: every access goes through descriptors)."""
        return self.root / ref[:2] / ref

    @contextlib.contextmanager
    def opened(self, create: bool = False) -> Iterator[int | None]:
        """A descriptor of the root, checked private (None: there is none, and ``create`` is False)."""
        made = False
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.root, limits.PAYLOAD_DIR_MODE)
                    made = True
            fd = os.open(self.root, _DIRECTORY)
        except FileNotFoundError as exc:
            if create:
                raise self.failed(exc, f"creating the folder {self.root}") from exc
            fd = None
        except OSError as exc:
            with contextlib.suppress(OSError):
                _check_private(self.root, os.lstat(self.root))  # a link, or a file: say so
            raise self.failed(exc, f"opening the folder {self.root}") from exc
        if fd is None:
            yield None
            return
        try:
            _check_private(self.root, os.fstat(fd))
            if self._owner is not None:
                try:
                    self._owner.check(fd, self.root)
                except OSError as exc:
                    raise self.failed(exc, f"marking the folder {self.root}") from exc
            if made:  # its entry must be durable before any file in it is named by a row
                try:
                    fsync_path(self.root.parent)
                except OSError as exc:
                    raise self.failed(exc, f"creating the folder {self.root}") from exc
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def new_file(self) -> Iterator[NewFile]:
        """A new payload file under ``tmp/``, to write and then :meth:`NewFile.keep`; leaving the block
        without that (or on any error) removes it."""
        with self.opened(create=True) as root:
            assert root is not None  # made above
            try:
                tmp = _subfolder(root, _TMP, create=True)
                if tmp is None:
                    raise NotADirectoryError(errno.ENOTDIR, f"{self.root / _TMP} is not a folder")
            except OSError as exc:
                raise self.failed(exc, "creating its folder tmp") from exc
            try:
                new = NewFile(self, root, tmp)
                try:
                    yield new
                finally:
                    new.close()
            finally:
                os.close(tmp)

    def open_file(self, ref: str, whose: str) -> BinaryIO:
        """Payload ``ref``'s file, for reading; MessageCorrupt (saying ``whose`` it is) if it is not
        there, or not a regular file of the store's own."""
        if not is_ref(ref):
            raise MessageCorrupt(f"{whose} names no file of the payload store ({ref[:80]!r})")
        with self.opened() as root:
            shard = None if root is None else _subfolder(root, ref[:2])
            try:
                if shard is None:
                    raise FileNotFoundError(errno.ENOENT, "no such file")
                try:
                    fd = os.open(ref, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=shard)
                finally:
                    os.close(shard)
            except FileNotFoundError:
                raise MessageCorrupt(
                    f"{whose} ({self.path(ref)}) is gone: the message was deleted, or the file was "
                    "removed by hand"
                ) from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise MessageCorrupt(f"{whose} ({self.path(ref)}) is not a regular file") from None
                raise self.failed(exc, f"reading {self.path(ref)}", writing=False) from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise MessageCorrupt(f"{whose} ({self.path(ref)}) is not a regular file")
        return os.fdopen(fd, "rb")

    def remove(self, ref: str) -> bool:
        """Remove payload ``ref``'s file if it is a regular file of the store's own; False if there is
        none (a name that is not a payload's, or an entry that is not a regular file, is logged)."""
        if not is_ref(ref):
            log.warning("payload store %s: %r is not a payload file's name; left alone", self.root, ref[:80])
            return False
        with self.opened() as root:
            try:
                shard = None if root is None else _subfolder(root, ref[:2])
                if shard is None:
                    return False
                try:
                    return _unlink(shard, ref)
                finally:
                    os.close(shard)
            except OSError as exc:
                raise self.failed(exc, f"removing {ref}") from exc

    def sweep(self, cutoff: float, named: Callable[[str], bool]) -> int:
        """Remove the store's files last changed before ``cutoff`` (epoch seconds): unfinished writes
        under ``tmp/``, and payloads for which ``named(ref)`` is False; returns how many went."""
        removed = 0
        with self.opened() as root:
            if root is None:
                return 0
            try:
                for entry in sorted(os.listdir(root)):
                    if entry == _TMP or _SHARD.fullmatch(entry):  # anything else is not the store's
                        removed += self._sweep_folder(root, entry, cutoff, named)
            except OSError as exc:
                raise self.failed(exc, "removing orphan files") from exc
        return removed

    @staticmethod
    def _sweep_folder(root: int, entry: str, cutoff: float, named: Callable[[str], bool]) -> int:
        folder = _subfolder(root, entry)
        if folder is None:
            return 0
        removed = 0
        try:
            for name in sorted(os.listdir(folder)):
                if entry == _TMP:
                    ours = name.endswith(_PARTIAL) and is_ref(name[: -len(_PARTIAL)])
                else:
                    ours = is_ref(name) and name.startswith(entry)
                if ours and _older(folder, name, cutoff) and (entry == _TMP or not named(name)):
                    removed += _unlink(folder, name)
        finally:
            os.close(folder)
        return removed

    def failed(self, exc: OSError, doing: str, writing: bool = True) -> DatabaseError:
        """The durableq error for ``exc``, met while ``doing`` something in the store."""
        where = f"the payload store {self.root}"
        why = exc.strerror or str(exc)
        if exc.errno in _NO_ROOM:
            return DatabaseFull(
                f"{where}: the disk or a file size limit is full ({why}, {doing}); nothing was stored"
            )
        if writing and exc.errno in _NOT_ALLOWED:
            return DatabaseReadOnly(f"{where} cannot be written ({why}, {doing}); check its permissions")
        return DatabaseError(f"{where}: {doing} failed: {why}")


def _subfolder(parent: int, name: str, create: bool = False) -> int | None:
    """A descriptor of the folder ``name`` in ``parent`` (made mode 0700 if ``create``), or None if
    there is none, or it is not a folder (a link, a file: not the store's)."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, limits.PAYLOAD_DIR_MODE, dir_fd=parent)
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        log.info("payload store: %s is not a folder (a link, or a file): not the store's, left alone", name)
        return None


def _unlink(folder: int, name: str) -> bool:
    """Unlink ``name`` in ``folder`` if it is a regular file; False if it is gone, or not a regular
    file (a link or a folder in its place is left alone, and logged)."""
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            log.warning("payload store: %s is not a regular file; left alone", name)
            return False
        os.unlink(name, dir_fd=folder)  # (an unlink never follows a link that took its place since)
    except FileNotFoundError:
        return False
    return True


def _older(folder: int, name: str, cutoff: float) -> bool:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime <= cutoff
    except FileNotFoundError:
        return False


class NewFile:
    """A payload file being written under ``tmp/`` (made by :meth:`Folder.new_file`)."""

    def __init__(self, folder: Folder, root: int, tmp: int) -> None:
        self.ref = new_ref()
        self._folder = folder
        self._root = root
        self._tmp = tmp
        self._partial = self.ref + _PARTIAL
        self._shard: int | None = None  # the shard's descriptor, once the file is renamed into it
        self._kept = False
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self._partial, flags, limits.DEFAULT_FILE_MODE, dir_fd=tmp)
        except OSError as exc:
            raise folder.failed(exc, "creating a payload file") from exc
        self._file = os.fdopen(fd, "wb")
        try:
            os.fchmod(fd, limits.DEFAULT_FILE_MODE)  # exactly, whatever the umask
        except OSError as exc:
            self.close()
            raise folder.failed(exc, "creating a payload file") from exc

    def write(self, data: bytes) -> None:
        try:
            self._file.write(data)
        except OSError as exc:
            raise self._folder.failed(exc, "writing a payload file") from exc

    def keep(self) -> None:
        """Make the file durable in place: fsync it, rename it into its shard, fsync the shard (and the
        root, for a new shard).  Always fsynced, whatever the durability: the row that names the file
        may reach the disk at any later commit, and must never arrive there without it."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            new_shard = not _exists(self._root, self.ref[:2])
            self._shard = _subfolder(self._root, self.ref[:2], create=True)
            if self._shard is None:
                raise NotADirectoryError(errno.ENOTDIR, f"{self._folder.root / self.ref[:2]} is not a folder")
            os.rename(self._partial, self.ref, src_dir_fd=self._tmp, dst_dir_fd=self._shard)
            os.fsync(self._shard)
            if new_shard:
                os.fsync(self._root)
        except OSError as exc:
            raise self._folder.failed(exc, "storing a payload file") from exc
        self._kept = True

    def close(self) -> None:
        """Close the file; unless it was kept, remove what was written (under either name)."""
        with contextlib.suppress(OSError):
            self._file.close()
        if not self._kept:
            with contextlib.suppress(OSError):
                os.unlink(self._partial, dir_fd=self._tmp)
            if self._shard is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.ref, dir_fd=self._shard)
        if self._shard is not None:
            os.close(self._shard)
            self._shard = None


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
