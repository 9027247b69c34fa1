"""Encryption at rest (the SSE analogue): data keys, and sealing message fields with them.

A queue that names a master key (``kms_master_key_id``) or uses the broker's managed key
(``sqs_managed_sse_enabled``) stores each message's body, attributes and payload metadata (which holds
its payload file's key) sealed with AES-256-GCM under a **data key**.  A data key is 32 random bytes,
stored in ``data_keys`` wrapped (AES-256-GCM) by a version of the master key, and used by a broker for
new messages of a queue for the queue's ``kms_data_key_reuse_period``; a message names its data key
by id (``messages.data_key_id``), so it decrypts for as long as the keyring holds that version.

Every sealed field is bound to its message and field by the associated data (``message id|field``):
ciphertext copied into another row, or into another field, fails to authenticate.  The queue is not
part of it, so a message moved between queues that use the same master key (a dead-letter queue and
its sources, typically) moves as it is, without the key; a move between queues with different keys
re-seals it in the move's transaction (:meth:`Sealer.reseal`), which needs both keys.  A move never
turns ciphertext into plaintext: a sealed message moved to a queue that does not encrypt stays sealed
under its data key (so redrive to a plaintext dead-letter queue needs no key either), and that queue
is marked ``sealed`` from then on.

A message this broker cannot open never blocks the others (docs/promises.md: "Undecryptable
messages").  What would keep it from opening *any* message of a queue is checked before a receive
claims anything (:meth:`Sealer.require_keys`: no keyring, a keyring file gone or unusable, one without
the queue's own master key), and fails the receive, which takes nothing.  What is left is one
message's own trouble (:data:`UNOPENABLE`: its data key wrapped by a key this keyring lacks, or
damaged): a receive hands that message out flagged (``ops/message_rows.py``), a move takes it as it is,
and a new message never reuses a stored data key this broker cannot unwrap.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .. import limits
from ..engines import forks
from ..engines.base import Connection
from ..engines.dialect import Dialect, encode_ids, for_each_dialect
from ..errors import KmsAccessDenied, KmsNotFound, MessageCorrupt
from ..keyring import Keyring, alias_of
from . import queue_rows
from .queue_rows import QueueConfig

log = logging.getLogger(__name__)

#: Why one message cannot be opened by a broker whose keyring is usable: its data key is wrapped by a
#: key (or version) the keyring lacks or holds other material under, or is damaged, or its content
#: fails its check.
UNOPENABLE = (KmsAccessDenied, KmsNotFound, MessageCorrupt)

_NONCE = 12
_TAG = 16
_KEY_BYTES = 32  # a data key: AES-256
#: Fields of a message row that are sealed, by column name (the associated data names them).
BODY, ATTRIBUTES, PAYLOAD_META = "body", "attributes", "payload_meta"

_INSERT_KEY = (
    "INSERT INTO durableq_data_keys (alias, version, wrapped, created_at) VALUES (?, ?, ?, ?) RETURNING id"
)
_SELECT_KEY = "SELECT alias, version, wrapped FROM durableq_data_keys WHERE id = ?"
_STORED = "SELECT wrapped FROM durableq_data_keys WHERE id = ?"
# The newest data key of a master key's version still within a reuse period (durableq_ix_data_keys_alias).
_RECENT_KEY = """
SELECT id, wrapped, created_at FROM durableq_data_keys
WHERE alias = ? AND version = ? AND created_at > ? AND created_at <= ?
ORDER BY created_at DESC LIMIT 1
"""


# The sealed rows among some of a queue's rows, with the alias of their data key.
def _sealed_rows(dialect: Dialect) -> str:
    return f"""
SELECT m.id, m.message_id, m.data_key_id, d.alias, m.body, m.attributes, m.payload_meta
FROM durableq_messages m LEFT JOIN durableq_data_keys d ON d.id = m.data_key_id
WHERE m.id IN {dialect.in_ids(":ids")} AND +m.queue_id = :queue_id
"""


_SEALED_ROWS = for_each_dialect(_sealed_rows)
# A queue that received sealed rows is sealed from now on (its receives open rows in a transaction).
_MARK_SEALED = "UPDATE durableq_queues SET sealed = TRUE WHERE id = ? AND NOT sealed"
_RESEAL = """
UPDATE durableq_messages SET data_key_id = :data_key_id, body = :body, attributes = :attributes,
  payload_meta = :payload_meta
WHERE id = :id
"""


def queue_alias(queue: QueueConfig) -> str | None:
    """The keyring alias a queue encrypts with now, or None for plaintext."""
    if queue.kms_master_key_id:
        return alias_of(queue.kms_master_key_id)
    if queue.sqs_managed_sse_enabled:
        return limits.MANAGED_KEY_ALIAS
    return None


@dataclass(frozen=True, slots=True)
class DataKey:
    id: int
    alias: str
    version: int
    aead: AESGCM
    created_at: int  # broker clock, epoch ms
    wrapped: str


class Sealer:
    """One broker's data keys: the current one per queue, and every one it has unwrapped."""

    def __init__(self, keyring: Keyring | None) -> None:
        self.keyring = keyring
        self._lock = threading.Lock()
        forks.renew_in_child(self)
        self._unwrapped: dict[int, tuple[str, AESGCM]] = {}  # id -> (its stored row, the key)
        self._current: dict[int, DataKey] = {}  # queue id -> its data key for new messages

    # -- sealing (send) ----------------------------------------------------------

    def data_key(self, conn: Connection, queue: QueueConfig, now: int) -> DataKey | None:
        """The data key for new messages of ``queue`` (None if it does not encrypt): one younger than the
        queue's reuse period and wrapped by the master key's current version (this broker's, else the
        newest any broker stored), else a new one (stored in ``data_keys`` by the caller's connection).
        Sharing stored keys keeps ``data_keys`` at about one row per reuse period and master key,
        however many processes come and go (each CLI call is one)."""
        alias = queue_alias(queue)
        if alias is None:
            return None
        keyring = self._keyring(queue, alias)
        if alias == limits.MANAGED_KEY_ALIAS:
            keyring.ensure(alias)
        version, master = keyring.material(alias)
        reuse = queue.kms_data_key_reuse_period * 1000
        with self._lock:
            key = self._current.get(queue.id)
        if (
            key is not None
            and key.alias == alias
            and key.version == version
            and 0 <= now - key.created_at < reuse
            # The transaction that stored it may have rolled back (and its id gone to another key).
            and conn.execute(_STORED, (key.id,)).fetchone() == (key.wrapped,)
        ):
            return key
        recent = conn.execute(_RECENT_KEY, (alias, version, now - reuse, now)).fetchone()
        key = None if recent is None else self._stored(recent, alias, version, master)
        if key is None:
            plain = AESGCM.generate_key(bit_length=256)
            nonce = os.urandom(_NONCE)
            wrapped = base64.b64encode(
                nonce + AESGCM(master).encrypt(nonce, plain, _wrap_aad(alias, version))
            ).decode("ascii")
            (key_id,) = conn.execute(_INSERT_KEY, (alias, version, wrapped, now)).fetchone()
            key = DataKey(key_id, alias, version, AESGCM(plain), now, wrapped)
            with self._lock:
                self._unwrapped[key_id] = (wrapped, key.aead)
        with self._lock:
            self._current[queue.id] = key
        return key

    def _stored(
        self, recent: tuple[int, str, int], alias: str, version: int, master: bytes
    ) -> DataKey | None:
        """A data key another broker stored, if this keyring's master key unwraps it.  One it cannot
        unwrap (wrapped under the same alias and version by a keyring with other material, or damaged)
        is never used for new messages: they would be sealed under a key this broker cannot open."""
        key_id, wrapped, created_at = recent
        try:
            aead = self._unwrap(key_id, alias, version, wrapped, master)
        except (KmsAccessDenied, MessageCorrupt) as exc:
            log.warning("not reusing stored data key %s: %s; making a new one", key_id, exc.message)
            return None
        return DataKey(key_id, alias, version, aead, created_at, wrapped)

    def forget(self, queue_id: int) -> None:
        """Drop the current data key of a queue (its settings changed, or a transaction that stored
        the key rolled back)."""
        with self._lock:
            self._current.pop(queue_id, None)

    # -- opening (receive, peek) -------------------------------------------------

    def require_keys(self, queue: QueueConfig) -> None:
        """Before a receive from ``queue`` claims anything: raise what would keep this broker from
        opening any of its messages.  No keyring while the queue encrypts (KmsAccessDenied); a keyring
        file that is gone (KmsNotFound) or unusable (KmsAccessDenied); a keyring without the master key
        the queue names (KmsNotFound; the managed key is made by the first send).  These are the
        consumer's trouble, not one message's: the receive takes nothing, as SQS refuses a ReceiveMessage
        its caller may not decrypt."""
        alias = queue_alias(queue)
        if self.keyring is None:
            if alias is not None:
                self._keyring(queue, alias)  # raises: no keyring
            return
        if alias is None or alias == limits.MANAGED_KEY_ALIAS:
            self.keyring.check()
        else:
            self.keyring.material(alias)

    def aead(self, conn: Connection, data_key_id: int) -> AESGCM:
        """The data key ``data_key_id``, unwrapped (KmsAccessDenied / KmsNotFound if it cannot be,
        MessageCorrupt if it is missing or damaged).

        The stored row is read each time (one primary-key lookup) and compared with the one this broker
        unwrapped: a key stored by a transaction that rolled back leaves its id free for another."""
        row = conn.execute(_SELECT_KEY, (data_key_id,)).fetchone()
        if row is None:
            raise MessageCorrupt(f"data key {data_key_id} is missing from the database")
        alias, version, wrapped = row
        with self._lock:
            found = self._unwrapped.get(data_key_id)
        if found is not None and found[0] == wrapped:
            return found[1]
        _, master = self._keyring(None, alias).material(alias, version)
        return self._unwrap(data_key_id, alias, version, wrapped, master)

    def _unwrap(self, data_key_id: int, alias: str, version: int, wrapped: str, master: bytes) -> AESGCM:
        """Data key ``data_key_id`` unwrapped with ``master`` (and remembered); KmsAccessDenied if it is
        not the master key that wrapped it."""
        try:
            blob = base64.b64decode(wrapped, validate=True)
        except ValueError:  # (binascii.Error is one)
            blob = b""
        if len(blob) != _NONCE + _KEY_BYTES + _TAG:
            raise MessageCorrupt(f"data key {data_key_id} (of key alias/{alias}) is damaged in the database")
        try:
            plain = AESGCM(master).decrypt(blob[:_NONCE], blob[_NONCE:], _wrap_aad(alias, version))
        except InvalidTag:
            raise KmsAccessDenied(
                f"key alias/{alias} (version {version}) of the keyring cannot unwrap data key "
                f"{data_key_id}: it is not the key the message was encrypted with"
            ) from None
        aead = AESGCM(plain)
        with self._lock:
            self._unwrapped[data_key_id] = (wrapped, aead)
        return aead

    def _keyring(self, queue: QueueConfig | None, alias: str) -> Keyring:
        if self.keyring is None:
            whose = f"queue {queue.name!r} encrypts" if queue is not None else "the message was encrypted"
            raise KmsAccessDenied(
                f"{whose} with key alias/{alias}, and this broker was opened without a keyring: pass "
                "keyring=PATH to durableq.open (command line: --keyring or DURABLEQ_KEYRING)"
            )
        return self.keyring

    # -- moving between keys -----------------------------------------------------

    def reseal(self, conn: Connection, target: QueueConfig, row_ids: Sequence[int], now: int) -> None:
        """Make the rows ``row_ids``, just moved to ``target``, sealed as ``target`` seals, in the
        caller's transaction: rows already under the target's master key are left as they are, and so
        are sealed rows arriving in a queue that does not encrypt (which is then marked sealed)."""
        want = queue_alias(target)
        rows = conn.execute(
            _SEALED_ROWS[conn.dialect], {"ids": encode_ids(row_ids), "queue_id": target.id}
        ).fetchall()
        changes = []
        kept_sealed = False
        for row_id, message_id, data_key_id, alias, body, attributes, meta in rows:
            if want is None and data_key_id is not None:
                kept_sealed = True
                continue
            if alias == want:
                continue
            key = self.data_key(conn, target, now)  # the target encrypts: its key is needed whatever
            assert key is not None
            fields: Fields = (body, attributes, meta)
            if data_key_id is not None:
                try:
                    fields = open_fields(self.aead(conn, data_key_id), message_id, fields)
                except UNOPENABLE as exc:
                    if self.keyring is None:
                        raise
                    # One this broker cannot open moves as it is, sealed under its own data key (as
                    # into a queue that does not encrypt): the move of the others must not fail for it.
                    log.warning("message %s moves to %r sealed as it was: %s", message_id, target.name, exc)
                    kept_sealed = True
                    continue
            fields = seal_fields(key.aead, message_id, fields)
            change = dict(zip(("body", "attributes", "payload_meta"), fields))
            changes.append({"id": row_id, "data_key_id": key.id, **change})
        if changes:
            conn.executemany(_RESEAL, changes)
        if kept_sealed and not target.sealed:
            conn.execute(_MARK_SEALED, (target.id,))
            queue_rows.changed(conn)  # every broker's catalog reloads the row


#: The sealable fields of a row, as stored: body, encoded attributes (or None), payload_meta (or None).
Fields = tuple[str, str | None, str | None]


def seal_fields(aead: AESGCM, message_id: str, fields: Fields) -> Fields:
    """A row's fields sealed for message ``message_id`` (absent ones stay None)."""
    return _each(_seal, aead, message_id, fields)


def open_fields(aead: AESGCM, message_id: str, fields: Fields) -> Fields:
    """The plaintext of a row's sealed fields; MessageCorrupt if one does not authenticate."""
    return _each(_open, aead, message_id, fields)


def _each(
    step: Callable[[AESGCM, str, str, str], str], aead: AESGCM, message_id: str, fields: Fields
) -> Fields:
    body, attributes, meta = fields
    return (
        step(aead, message_id, BODY, body),
        None if attributes is None else step(aead, message_id, ATTRIBUTES, attributes),
        None if meta is None else step(aead, message_id, PAYLOAD_META, meta),
    )


def _seal(aead: AESGCM, message_id: str, field: str, plain: str) -> str:
    """``plain`` sealed for ``field`` of message ``message_id`` (the associated data binds it to
    both): base64 of nonce + ciphertext + tag."""
    nonce = os.urandom(_NONCE)
    sealed = aead.encrypt(nonce, plain.encode("utf-8"), f"{message_id}|{field}".encode())
    return base64.b64encode(nonce + sealed).decode("ascii")


def _open(aead: AESGCM, message_id: str, field: str, sealed: str) -> str:
    try:
        blob = base64.b64decode(sealed, validate=True)
        return aead.decrypt(blob[:_NONCE], blob[_NONCE:], f"{message_id}|{field}".encode()).decode("utf-8")
    except (InvalidTag, ValueError):  # (UnicodeDecodeError is a ValueError)
        raise MessageCorrupt(
            f"the {field} of message {message_id} does not authenticate under its data key: it was "
            "altered, or copied from another message"
        ) from None


def _wrap_aad(alias: str, version: int) -> bytes:
    return f"durableq data key|{alias}|{version}".encode()
