"""Large payloads (the Extended Client Library analogue): message bodies stored outside their row.

A queue with ``large_payloads`` takes messages above its ``maximum_message_size`` (up to
:data:`~durableq.limits.MAX_PAYLOAD_SIZE`); each one's payload is a file of the **payload store**, a
folder beside the database (``PATH.payloads/`` unless ``payload_dir`` says otherwise), and its row holds
the file's name (``payload_ref``), the payload's size and, in ``payload_meta``, its SHA-256, MD5 and the
file's key.

The lifecycle has one rule in each direction:

- **Written before its row.**  The file is written under ``tmp/``, fsynced, renamed into place and its
  folder fsynced, and only then is the row inserted.  A crash in between leaves a file no row names
  (an orphan, removed by :meth:`Payloads.sweep_orphans` once older than a grace period), never a row
  without its file.
- **Removed after its row.**  The trigger ``messages_payload_gone`` (revision 0007) records the file of
  every removed row in ``payload_trash``, in the transaction that removed it, whatever removed it
  (delete, expiry, purge, deleting the queue) and in whichever process; any broker then unlinks the
  file and forgets the record (:meth:`Payloads.reclaim`).

The folder itself, and which of its entries are the store's, are ``payload_folder.py``'s: the store
touches only files it made, inside its own private folder, by names it recognises.

Every payload file is encrypted with AES-256-GCM under a key of its own, in chunks of
:data:`~durableq.limits.PAYLOAD_CHUNK_SIZE` whose nonces count the chunks and mark the last one: a file
that was altered, swapped, cut off or extended fails its check before any of its bytes are returned
(the reader checks the whole file first), and memory stays flat while a payload is written or read.
Where the queue encrypts at rest, the file key is sealed with the rest of the row (``sealing.py``);
where it does not, the file key is in the row in plaintext and the encryption only guards integrity.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .. import limits
from ..engines import forks
from ..engines.base import Connection, Database
from ..errors import DatabaseError, DurableQError, InvalidParameterValue, MessageCorrupt, Reason
from .payload_folder import Folder
from .payload_owner import Owner

log = logging.getLogger(__name__)

_TAG = 16
_CHUNK = limits.PAYLOAD_CHUNK_SIZE
_TRASH_BATCH = 500
_TRASH = "SELECT ref FROM durableq_payload_trash LIMIT ?"
_FORGET = "DELETE FROM durableq_payload_trash WHERE ref = ?"
_IDENTITY = "SELECT id FROM durableq_database_identity"
_NAMED = "SELECT 1 FROM durableq_messages WHERE payload_ref = ? LIMIT 1"
#: How often a broker whose file has no payload store looks whether another process made one.
_RECHECK = 1.0


@dataclass(frozen=True, slots=True)
class StoredPayload:
    """A payload file, as its row describes it."""

    ref: str
    size: int
    sha256: str
    md5: str
    key: bytes

    def meta(self) -> str:
        """``payload_meta`` of the row (sealed with the row where the queue encrypts)."""
        return json.dumps(
            {"sha256": self.sha256, "md5": self.md5, "key": base64.b64encode(self.key).decode("ascii")}
        )

    @classmethod
    def from_row(cls, ref: str, size: int, meta: str) -> StoredPayload:
        values = json.loads(meta)
        return cls(ref, size, values["sha256"], values["md5"], base64.b64decode(values["key"]))


def _nonce(index: int, last: bool) -> bytes:
    return index.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


class PayloadStore:
    """The payload files: ``AB/ABCD…`` for a payload named ``ABCD…``, and ``tmp/`` (``payload_folder``
    keeps the folder's rules)."""

    def __init__(self, root: Path | None, owner: Owner | None = None) -> None:
        self._root = root
        self.folder = None if root is None else Folder(root, owner)

    @property
    def configured(self) -> bool:
        return self._root is not None

    @property
    def root(self) -> Path:
        return self._folder().root

    def _folder(self) -> Folder:
        if self.folder is None:
            raise InvalidParameterValue(
                "this broker has no payload store: on a PostgreSQL database, open it with "
                "payload_dir= (CLI: --payload-dir), a folder every host that uses the queue shares",
                parameter="payload_dir",
                reason=Reason.MISSING,
            )
        return self.folder

    def path(self, ref: str) -> Path:
        return self._folder().path(ref)

    def write(self, source: BinaryIO | None, first: bytes = b"") -> StoredPayload:
        """Store what ``first`` and then ``source`` hold (read in chunks); returns it once its file is
        durable in place.  InvalidParameterValue if it is empty or larger than the limit; DatabaseFull
        (or another DatabaseError) if the store cannot take it, leaving no file behind."""
        key = AESGCM.generate_key(bit_length=256)
        aead = AESGCM(key)
        sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
        size = 0
        with self._folder().new_file() as out:
            chunks = _chunks(source, first)
            chunk = next(chunks, b"")
            index = 0
            while chunk:
                following = next(chunks, b"")
                size += len(chunk)
                if size > limits.MAX_PAYLOAD_SIZE:
                    raise InvalidParameterValue(
                        f"the payload is over {limits.MAX_PAYLOAD_SIZE} bytes, the most a queue with "
                        "large payloads takes"
                    )
                sha.update(chunk)
                md5.update(chunk)
                out.write(aead.encrypt(_nonce(index, not following), chunk, None))
                chunk, index = following, index + 1
            if size == 0:
                raise InvalidParameterValue("the payload is empty; a message body has at least 1 byte")
            out.keep()
        return StoredPayload(out.ref, size, sha.hexdigest(), md5.hexdigest(), key)

    def discard(self, ref: str) -> None:
        """Remove a payload file (gone already is fine)."""
        self._folder().remove(ref)

    def open(self, payload: StoredPayload, message_id: str) -> io.BufferedReader:
        """A binary file object over the payload's plaintext: the whole file is checked before its
        first byte is returned (MessageCorrupt otherwise), and each chunk again as it is read."""
        raw = self._folder().open_file(payload.ref, f"the payload file of message {message_id}")
        return io.BufferedReader(_PayloadReader(raw, payload, message_id), buffer_size=_CHUNK)


def _chunks(source: BinaryIO | None, first: bytes) -> Iterator[bytes]:
    """What ``first`` then ``source`` hold, in chunks of the chunk size (the last may be shorter)."""
    view, offset = memoryview(first), 0
    while True:
        chunk = bytearray(view[offset : offset + _CHUNK])
        offset += len(chunk)
        while len(chunk) < _CHUNK and source is not None:
            more = source.read(_CHUNK - len(chunk))
            if not more:
                source = None
            elif isinstance(more, (bytes, bytearray, memoryview)):
                chunk += more
            else:
                raise InvalidParameterValue(
                    "a payload is read from a binary file (opened with 'rb'); "
                    f"its read() returned {type(more).__name__}"
                )
        if not chunk:
            return
        yield bytes(chunk)


class _PayloadReader(io.RawIOBase):
    """Decrypts a payload file chunk by chunk.  Before its first byte goes out, the whole file is
    checked (every chunk authenticates, nothing follows the last, the size and SHA-256 are the row's);
    then each chunk authenticates again as it is streamed, so a file changed in between still returns
    no byte that was not checked.  :meth:`readall` (``read()`` of the whole) checks in its one pass."""

    def __init__(self, raw: BinaryIO, payload: StoredPayload, message_id: str) -> None:
        self._raw = raw
        self._payload = payload
        self._message_id = message_id
        self._aead = AESGCM(payload.key)
        self._chunks = max(1, -(-payload.size // _CHUNK))
        self._index = 0
        self._buffer = b""
        self._checked = False

    def readable(self) -> bool:
        return True

    def readinto(self, target: memoryview) -> int:  # type: ignore[override]
        if not self._checked:
            for _ in self._checking():
                pass
            self._raw.seek(0)
        if not self._buffer:
            if self._index >= self._chunks:
                return 0
            self._buffer = self._decrypt(self._index)
            self._index += 1
        count = min(len(target), len(self._buffer))
        target[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count

    def readall(self) -> bytes:
        if self._checked:
            return super().readall() or b""
        whole = bytearray()
        for plain in self._checking():
            whole += plain
        self._index = self._chunks
        return bytes(whole)

    def _checking(self) -> Iterator[bytes]:
        """Every chunk's plaintext, from the start of the file; MessageCorrupt (before the chunk that
        fails, or after the last) if the file is not exactly the payload its row describes."""
        sha, size = hashlib.sha256(), 0
        for index in range(self._chunks):
            plain = self._decrypt(index)
            sha.update(plain)
            size += len(plain)
            if index < self._chunks - 1:
                yield plain
        if self._read(1):
            raise self._corrupt("the file is longer than its payload")
        if size != self._payload.size or sha.hexdigest() != self._payload.sha256:
            raise self._corrupt("its SHA-256 does not match the one its message holds")
        self._checked = True
        yield plain

    def _decrypt(self, index: int) -> bytes:
        sealed = self._read(_CHUNK + _TAG)
        try:
            return self._aead.decrypt(_nonce(index, index == self._chunks - 1), sealed, None)
        except InvalidTag:
            raise self._corrupt(f"chunk {index} does not authenticate") from None

    def _read(self, size: int) -> bytes:
        try:
            return self._raw.read(size)
        except OSError as exc:
            raise DatabaseError(
                f"cannot read the payload file of message {self._message_id}: {exc.strerror or exc}"
            ) from exc

    def _corrupt(self, why: str) -> MessageCorrupt:
        return MessageCorrupt(
            f"the payload of message {self._message_id} failed its check ({why}); none of it is returned"
        )

    def close(self) -> None:
        self._raw.close()
        super().close()


def identity(conn: Connection) -> str:
    """The identity of the database ``conn`` is connected to (made once, when it was created)."""
    (found,) = conn.execute(_IDENTITY).fetchone()
    return str(found)


class Payloads:
    """One broker's side of the payload store: writing, and removing what no row names any more."""

    def __init__(self, db: Database, root: Path | None) -> None:
        self._db = db
        self.store = PayloadStore(root, Owner(self.database_identity))
        self._database_identity: str | None = None
        self._lock = threading.Lock()  # one reclaim at a time
        forks.renew_in_child(self)
        self._active = self.store.folder is not None and self.store.folder.exists()
        self._looked = time.monotonic()
        self._swept = 0.0  # monotonic time of the last orphan sweep (0: never)

    def database_identity(self) -> str:
        """The database's identity, which its store must name (see ``payload_owner``) and a
        transaction's connection must show (``durableq.transaction``): made once, when the database
        was created, so read once."""
        if self._database_identity is None:
            with self._db.statement() as conn:
                self._database_identity = identity(conn)
        return self._database_identity

    @property
    def root(self) -> Path | None:
        """The store's folder (None: the broker has none; see :class:`PayloadStore`)."""
        return self.store._root

    def write(self, source: BinaryIO | None, first: bytes = b"") -> StoredPayload:
        payload = self.store.write(source, first)
        self._active = True
        return payload

    def abandon(self, ref: str) -> None:
        """A send that wrote payload ``ref`` failed: remove the file, unless a row names it after all
        (the failure came after the commit), in which case it stays with its row."""
        try:
            with self._db.statement() as conn:
                named = conn.execute(_NAMED, (ref,)).fetchone() is not None
        except DurableQError:  # the file cannot tell now: the orphan sweep decides later
            return
        if not named:
            self.store.discard(ref)

    def settle(self) -> None:
        """After a call that may have removed rows: remove the payload files no row names any more
        (and, at most every sweep interval, the orphans).  Costs one check of a flag where the file has
        no payload store."""
        if not self._active:
            now = time.monotonic()
            if now - self._looked < _RECHECK:
                return
            self._looked = now
            if self.store.folder is None or not self.store.folder.exists():
                return
            self._active = True
        try:
            self.reclaim()
            if time.monotonic() - self._swept >= limits.PAYLOAD_SWEEP_INTERVAL or not self._swept:
                self.sweep_orphans()
        except DurableQError:  # a busy or full file: the next call (of any broker) does it
            log.warning("could not remove payload files now (will retry)", exc_info=True)

    def reclaim(self) -> int:
        """Remove the files of rows that are gone (``payload_trash``); returns how many records were
        settled.  A record that is not a payload's name (a row written by hand: an absolute path,
        ``..``) is logged and dropped, and nothing is removed for it."""
        folder, done = self.store.folder, 0
        if folder is None:  # the records wait for a broker with the store (another host's, say)
            return 0
        with self._lock:
            while True:
                with self._db.statement() as conn:
                    refs = [ref for (ref,) in conn.execute(_TRASH, (_TRASH_BATCH,))]
                if not refs:
                    return done
                for ref in refs:
                    folder.remove(ref)
                with self._db.write() as conn:  # one transaction for the batch
                    conn.executemany(_FORGET, [(ref,) for ref in refs])
                done += len(refs)

    def sweep_orphans(self, grace: float = limits.PAYLOAD_ORPHAN_GRACE) -> int:
        """Remove payload files that no row names and that are older than ``grace`` seconds (those of
        sends cut by a crash between writing the file and committing the row); returns how many."""
        self._swept = time.monotonic()
        if self.store.folder is None:
            return 0
        return self.store.folder.sweep(time.time() - grace, self._named)

    def _named(self, ref: str) -> bool:
        with self._db.statement() as conn:
            return conn.execute(_NAMED, (ref,)).fetchone() is not None
