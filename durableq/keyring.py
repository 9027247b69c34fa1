"""The keyring: master keys by alias, in a JSON file readable by its owner only (the KMS analogue).

A master key never encrypts a message itself: it wraps the data keys that do (see
``durableq/ops/sealing.py``).  Each alias has numbered versions; ``rotate`` adds a version and makes
it the current one, and older versions stay, so messages encrypted under them still decrypt.  The
file is changed under a lock file (``KEYRING.lock``) and replaced atomically (written beside it,
fsynced, renamed), so concurrent ``create``/``rotate`` calls of several processes lose nothing and a
crash leaves the old file or the new one.

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
from .engines.files import fsync_path
from .errors import DatabaseLocked, InvalidParameterValue, KmsAccessDenied, KmsNotFound

__all__ = ["KeyInfo", "Keyring", "alias_of"]

_FORMAT = "durableq-keyring"
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
    if not name or len(name) > limits.MAX_KEY_ALIAS_LENGTH or not _ALIAS.fullmatch(name):
        raise InvalidParameterValue(
            f"key alias {alias!r} is not allowed: use 1 to {limits.MAX_KEY_ALIAS_LENGTH} characters "
            "of A-Z a-z 0-9 / _ - (optionally after 'alias/')"
        )
    return name


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
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._keys: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<durableq.Keyring {str(self.path)!r}>"

    # -- reading -----------------------------------------------------------------

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
        """Create a new master key (version 1); InvalidParameterValue if the alias exists."""
        name = normalize_alias(alias)
        with self._changing() as keys:
            if name in keys:
                raise InvalidParameterValue(
                    f"key alias/{name} exists in {self.path}; rotate it with `durableq keys rotate {name}`"
                )
            keys[name] = {"key_id": str(uuid.uuid4()), "current": 1, "versions": {"1": _version()}}
            return _info(name, keys[name])

    def ensure(self, alias: str) -> None:
        """Create ``alias`` unless it exists (the broker's managed key)."""
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

    def _current(self) -> dict[str, Any]:
        """The keys as the file holds them now (re-read only when its stamp changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
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
            document = json.loads(self.path.read_text("utf-8"))
            if document.get("format") != _FORMAT or not isinstance(document.get("keys"), dict):
                raise ValueError("not a durableq keyring")
            keys: dict[str, Any] = document["keys"]
        except (OSError, ValueError, AttributeError) as exc:
            raise KmsAccessDenied(f"{self.path} is not a usable durableq keyring: {exc}") from exc
        return keys

    @contextlib.contextmanager
    def _changing(self) -> Any:
        """The keys to change, under the lock file; written back atomically when the block ends."""
        lock = FileLock(f"{self.path}.lock", mode=limits.KEYRING_FILE_MODE)
        try:
            with lock.acquire(timeout=_LOCK_TIMEOUT):
                keys = json.loads(json.dumps(self._current()))  # a copy: readers keep the old one
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
