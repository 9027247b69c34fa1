"""The keyring: master keys by alias, in a JSON file readable by its owner only (the KMS analogue).

A master key never encrypts a message itself: it wraps the data keys that do (see
``durableq/ops/sealing.py``).  Each alias has numbered versions; ``rotate`` adds a version and makes
it the current one, and older versions stay, so messages encrypted under them still decrypt.  The
file is changed under a lock file (``KEYRING.lock``) and replaced atomically (written beside it,
fsynced, renamed), so concurrent ``create``/``rotate`` calls of several processes lose nothing and a
crash leaves the old file or the new one.

Only :meth:`Keyring.create` makes a keyring file.  Every other use of a path with no file behind it
is an error (``KmsNotFound``): a mistyped path must not become a new keyring whose fresh keys seal
messages nobody else can open.  A file whose contents are wrong is an error that names the file and
what is wrong (``KmsAccessDenied``), checked whole when the file is read, never showing key material.

Layout::

    {"format": "durableq-keyring", "version": 1,
     "keys": {"orders": {"key_id": "…", "current": 2,
                         "versions": {"1": {"material": "<base64 of 32 bytes>", "created_at": "…"},
                                      "2": {...}}}}}
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import stat
import tempfile
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from . import limits
from .engines import forks
from .engines.files import fsync_path
from .errors import DatabaseLocked, InvalidParameterValue, KmsAccessDenied, KmsNotFound

__all__ = ["KeyInfo", "Keyring", "alias_of"]

_FORMAT = "durableq-keyring"
_FORMAT_VERSION = 1
_ALIAS = re.compile(r"[A-Za-z0-9/_-]+")
_KEY_BYTES = 32  # AES-256
_LOCK_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """A master key as ``Keyring.list`` shows it (never its material)."""

    alias: str  # without "alias/"
    key_id: str
    current_version: int
    versions: int
    created_at: datetime  # of the current version


def normalize_alias(alias: object) -> str:
    """``NAME`` or ``alias/NAME`` -> ``NAME``; refuses names KMS would refuse."""
    if not isinstance(alias, str):
        raise InvalidParameterValue(f"a key alias must be text; got {type(alias).__name__}")
    name = alias.removeprefix("alias/")
    if not _allowed(name):
        raise InvalidParameterValue(f"key alias {alias!r} is not allowed: {_ALIAS_RULE}")
    return name


_ALIAS_RULE = (
    f"use 1 to {limits.MAX_KEY_ALIAS_LENGTH} characters of A-Z a-z 0-9 / _ - (optionally after 'alias/')"
)


def _allowed(name: str) -> bool:
    return 0 < len(name) <= limits.MAX_KEY_ALIAS_LENGTH and _ALIAS.fullmatch(name) is not None


def alias_of(kms_master_key_id: str) -> str:
    """The keyring alias a queue's ``kms_master_key_id`` names: ``alias/NAME``, an alias ARN
    (``arn:aws:kms:REGION:ACCOUNT:alias/NAME``) or a key id / key ARN (resolved through the keyring
    when used: returned as ``key/ID``)."""
    if kms_master_key_id.startswith("arn:"):
        resource = kms_master_key_id.split(":", 5)[-1]
        if resource.startswith("alias/"):
            return resource.removeprefix("alias/")
        return resource  # key/ID
    if kms_master_key_id.startswith("alias/"):
        return kms_master_key_id.removeprefix("alias/")
    return f"key/{kms_master_key_id}"


class Keyring:
    """Master keys in the JSON file at ``path`` (mode 0600).  Thread-safe; re-read when the file changes
    (another process created or rotated a key)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidParameterValue(f"keyring must be a file path; got {type(path).__name__}")
        if "\x00" in os.fspath(path):  # no file has such a name (os.stat would raise ValueError)
            raise InvalidParameterValue(f"keyring {str(path)[:200]!r} is not a usable file name (a NUL byte)")
        self.path = Path(os.path.abspath(path))  # the same file after the working folder changes
        self._lock = threading.Lock()
        forks.renew_in_child(self)
        self._stamp: tuple[int, int, int] | None = None
        self._keys: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<durableq.Keyring {str(self.path)!r}>"

    # -- reading -----------------------------------------------------------------

    def check(self) -> None:
        """Read the file now: KmsNotFound if there is none, KmsAccessDenied if it is not a usable
        keyring (what :func:`durableq.open` does with the keyring it is given)."""
        self._current()

    def list(self) -> list[KeyInfo]:
        """The keys, by alias."""
        keys = self._current()
        return [_info(alias, entry) for alias, entry in sorted(keys.items())]

    def material(self, alias: str, version: int | None = None) -> tuple[int, bytes]:
        """The key material of ``alias`` (a ``key/ID`` is looked up by key id) at ``version`` (default:
        the current one), with its version; KmsNotFound if the keyring has no such key or version."""
        keys = self._current()
        entry = keys.get(alias)
        if entry is None and alias.startswith("key/"):
            key_id = alias.removeprefix("key/")
            entry = next((e for e in keys.values() if e.get("key_id") == key_id), None)
        if entry is None:
            raise KmsNotFound(
                f"the keyring {self.path} has no key alias/{alias}; create it with "
                f"`durableq keys create {alias}` (or Keyring.create)"
            )
        number = int(entry["current"]) if version is None else version
        found = entry["versions"].get(str(number))
        if found is None:
            raise KmsNotFound(
                f"the keyring {self.path} has no version {number} of key alias/{alias} "
                f"(it has {', '.join(sorted(entry['versions'], key=int))}): a message encrypted under it "
                "cannot be read without the keyring that held it"
            )
        return number, base64.b64decode(found["material"])

    def current_version(self, alias: str) -> int:
        """The version new data keys of ``alias`` are wrapped with."""
        return self.material(alias)[0]

    # -- changing ----------------------------------------------------------------

    def create(self, alias: str) -> KeyInfo:
        """Create a new master key (version 1), and the keyring file if there is none (the one way a
        keyring file is made); InvalidParameterValue if the alias exists."""
        name = normalize_alias(alias)
        with self._changing(new_file=True) as keys:
            if name in keys:
                raise InvalidParameterValue(
                    f"key alias/{name} exists in {self.path}; rotate it with `durableq keys rotate {name}`"
                )
            keys[name] = {"key_id": str(uuid.uuid4()), "current": 1, "versions": {"1": _version()}}
            return _info(name, keys[name])

    def ensure(self, alias: str) -> None:
        """Create ``alias`` unless it exists (the broker's managed key), in the keyring file that
        exists (KmsNotFound if there is none: never made here)."""
        name = normalize_alias(alias)
        if name in self._current():
            return
        with self._changing() as keys:
            keys.setdefault(name, {"key_id": str(uuid.uuid4()), "current": 1, "versions": {"1": _version()}})

    def rotate(self, alias: str) -> KeyInfo:
        """Add a new version of ``alias`` and make it current; the old versions stay (old messages
        still decrypt; new data keys use the new version)."""
        name = normalize_alias(alias)
        with self._changing() as keys:
            entry = keys.get(name)
            if entry is None:
                raise KmsNotFound(f"the keyring {self.path} has no key alias/{name}")
            number = max(int(v) for v in entry["versions"]) + 1
            entry["versions"][str(number)] = _version()
            entry["current"] = number
            return _info(name, entry)

    # -- the file ----------------------------------------------------------------

    def _current(self, *, missing_ok: bool = False) -> dict[str, Any]:
        """The keys as the file holds them now (re-read only when its stamp changed).  No file:
        KmsNotFound, or no keys with ``missing_ok`` (only for the change that creates it)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if missing_ok:
                return {}
            raise KmsNotFound(
                f"there is no keyring file at {self.path}: create one with `durableq keys create ALIAS` "
                "(or Keyring(path).create(alias)), or give the path of the keyring that holds the keys"
            ) from None
        except OSError as exc:
            raise KmsAccessDenied(f"cannot read the keyring {self.path}: {exc.strerror or exc}") from exc
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._keys = self._load(st)
                self._stamp = stamp
            return self._keys

    def _load(self, st: os.stat_result) -> dict[str, Any]:
        if st.st_mode & 0o077:
            raise KmsAccessDenied(
                f"the keyring {self.path} is readable by other users (mode {stat.S_IMODE(st.st_mode):o}); "
                f"make it private: chmod 600 {self.path}"
            )
        try:
            text = self.path.read_text("utf-8")
        except UnicodeDecodeError:
            raise self._unusable("it is not UTF-8 text") from None
        except OSError as exc:
            raise KmsAccessDenied(f"cannot read the keyring {self.path}: {exc.strerror or exc}") from exc
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:  # its message names a position, never the text
            raise self._unusable(
                f"it is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
        try:
            return _keys_of(document)
        except _Malformed as exc:
            raise self._unusable(str(exc)) from None

    def _unusable(self, what: str) -> KmsAccessDenied:
        return KmsAccessDenied(
            f"the keyring {self.path} is not a usable durableq keyring: {what}; restore it from your copy "
            "(durableq never rewrites a keyring it cannot read)"
        )

    @contextlib.contextmanager
    def _changing(self, *, new_file: bool = False) -> Any:
        """The keys to change, under the lock file; written back atomically when the block ends.  The
        file must exist, unless ``new_file`` (``create``)."""
        if not new_file:
            self._current()  # before the lock file: no file, no lock file made beside it either
        lock = FileLock(f"{self.path}.lock", mode=limits.KEYRING_FILE_MODE)
        try:
            with lock.acquire(timeout=_LOCK_TIMEOUT):
                # A copy: readers keep the old one.  (Read again under the lock: another process may
                # have changed the file, or removed it, meanwhile.)
                keys = json.loads(json.dumps(self._current(missing_ok=new_file)))
                yield keys
                self._write(keys)
        except Timeout as exc:
            raise DatabaseLocked(
                f"another process held the keyring lock {lock.lock_file} for more than {_LOCK_TIMEOUT:g} s"
            ) from exc
        except FileNotFoundError as exc:
            raise InvalidParameterValue(
                f"cannot write the keyring {self.path}: the folder {self.path.parent} does not exist"
            ) from exc

    def _write(self, keys: dict[str, Any]) -> None:
        document = {"format": _FORMAT, "version": 1, "keys": keys}
        fd, partial = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            os.fchmod(fd, limits.KEYRING_FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(document, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
            raise
        fsync_path(self.path.parent)


class _Malformed(Exception):
    """What is wrong with a keyring document (never quoting key material)."""


def _keys_of(document: object) -> dict[str, Any]:
    """The ``keys`` of a keyring document, checked whole: every alias, key and version has the
    fields and types :class:`Keyring` relies on, and every key is 32 bytes of base64."""
    if not isinstance(document, dict):
        raise _Malformed(f"it is a JSON {_json_type(document)}, not an object")
    if document.get("format") != _FORMAT:
        raise _Malformed(f'it is not a durableq keyring (its "format" is not "{_FORMAT}")')
    version = document.get("version")
    if version != _FORMAT_VERSION or isinstance(version, bool):
        shown = f"version {version}" if isinstance(version, int) else "a version that is not a number"
        raise _Malformed(f"it is {shown} of the format; this durableq reads version {_FORMAT_VERSION}")
    keys = document.get("keys")
    if not isinstance(keys, dict):
        raise _Malformed('"keys" must be an object (alias: key)')
    for alias, entry in keys.items():
        if not _allowed(alias):
            raise _Malformed(f"key alias {alias!r} is not allowed: {_ALIAS_RULE}")
        _check_key(f"alias/{alias}", entry)
    return keys


def _check_key(where: str, entry: object) -> None:
    if not isinstance(entry, dict):
        raise _Malformed(f"{where}: must be an object")
    key_id, current, versions = (_field(where, entry, name) for name in ("key_id", "current", "versions"))
    if not isinstance(key_id, str) or not key_id:
        raise _Malformed(f'{where}: "key_id" must be text')
    if not isinstance(current, int) or isinstance(current, bool):
        raise _Malformed(f'{where}: "current" must be a version number')
    if not isinstance(versions, dict) or not versions:
        raise _Malformed(f'{where}: no versions ("versions" must be an object of at least one version)')
    for number, version in versions.items():
        if not (number.isdecimal() and number.isascii() and str(int(number)) == number and int(number) > 0):
            raise _Malformed(f"{where}: version {number!r} is not a number from 1")
        _check_version(f"{where}, version {number}", version)
    if str(current) not in versions:
        held = ", ".join(sorted(versions, key=int))
        raise _Malformed(f"{where}: its current version {current} is not among its versions ({held})")


def _check_version(where: str, version: object) -> None:
    if not isinstance(version, dict):
        raise _Malformed(f"{where}: must be an object")
    material, created_at = (_field(where, version, name) for name in ("material", "created_at"))
    try:
        if not isinstance(material, str):
            raise ValueError
        size = len(base64.b64decode(material, validate=True))
    except ValueError:  # (binascii.Error is one)
        raise _Malformed(f'{where}: "material" is not base64') from None
    if size != _KEY_BYTES:
        raise _Malformed(f'{where}: "material" must be {_KEY_BYTES} bytes (AES-256); it holds {size}')
    try:
        if not isinstance(created_at, str):
            raise ValueError
        datetime.fromisoformat(created_at)
    except ValueError:
        raise _Malformed(f'{where}: "created_at" is not an ISO 8601 time') from None


def _field(where: str, entry: dict[str, Any], name: str) -> Any:
    if name not in entry:
        raise _Malformed(f'{where}: "{name}" is missing')
    return entry[name]


def _json_type(value: object) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _version() -> dict[str, str]:
    return {
        "material": base64.b64encode(secrets.token_bytes(_KEY_BYTES)).decode("ascii"),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _info(alias: str, entry: dict[str, Any]) -> KeyInfo:
    current = entry["versions"][str(entry["current"])]
    return KeyInfo(
        alias=alias,
        key_id=entry["key_id"],
        current_version=int(entry["current"]),
        versions=len(entry["versions"]),
        created_at=datetime.fromisoformat(current["created_at"]),
    )
