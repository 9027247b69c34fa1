"""What a hostile run works on: its queues, its keyring, its payload store and the files beside it.

The *checked* queues are judged message by message by the reliability
checker: a standard and a FIFO queue, an encrypted one and one with large
payloads (the last two are *opaque*: their rows hold ciphertext or a payload
reference, so the checker matches them by message id, not by body).  Every
one keeps message history, so the events are checked too.  *Scratch* queues
are created, purged and deleted under the mix's feet; ``spin`` dead-letters
to ``spin-dlq``, which the mix deletes and creates again.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import durableq

from .. import store

STANDARD = "hx"
FIFO = "hx.fifo"
SEALED = "hx-sealed"
BIG = "hx-big"
CHECKED = (STANDARD, FIFO, SEALED, BIG)
OPAQUE = (SEALED, BIG)
GROUPS = [f"g{i}" for i in range(4)]
KEY = "alias/hx"
#: Short: messages a killed process held come back within a run.
VISIBILITY = 2
#: Rows of BIG over this many bytes go to the payload store.
BIG_LIMIT = 1024
SCRATCH = ("scratch-0", "scratch-1", "scratch-2.fifo")
SEALED_SCRATCH = "scratch-sealed"
SPIN, SPIN_DLQ = "spin", "spin-dlq"
#: Nobody sends here: a long poll on it waits its whole time (and starts the change watcher).
IDLE = "idle"
#: Files that are not payloads, in or under the payload store: none may ever go.
CANARIES = ("notes.txt", "nested/keep.bin", "0a1b2c3d4e5f.payload")


@dataclass(frozen=True)
class Place:
    """Where a run keeps its things; ``options`` are the keywords every broker of the run opens with."""

    db: str
    keyring: str
    payload_dir: str | None
    canaries: list[str]
    how: str  # which kind of payload store: default, own, shared, dbdir, symlink

    @property
    def options(self) -> dict[str, Any]:
        return {"keyring": self.keyring, "payload_dir": self.payload_dir}


def _plant(folder: Path) -> list[str]:
    """Files that are not payloads, old enough for any orphan sweep's grace period."""
    planted = []
    old = time.time() - 3 * 86_400
    for name in CANARIES:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"not a payload: {name}\n")
        os.utime(path, (old, old))
        planted.append(str(path))
    return planted


def prepare(folder: Path, rng: random.Random, db: str | None = None, how: str | None = None) -> Place:
    """The run's database (a SQLite file in ``folder/data`` unless ``db`` names one), keyring and
    payload store.  The store is, at random: the default; a folder of its own; a private folder shared
    with other files; or, after checking that they are refused, the database's own folder or a symlink
    (then a folder of its own).  Files that are not payloads are planted wherever the store could
    reach them."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    db = db or str(data / "hostile.db")
    on_pg = store.on_postgres(db)
    how = how or rng.choice(["default", "own", "shared", "dbdir", "symlink"])
    canaries: list[str] = _plant(folder / "beside")
    payload_dir: str | None
    if how == "default":
        payload_dir = str(data / "payloads") if on_pg else None
    elif how == "own":
        payload_dir = str(folder / "payloads")
    elif how == "shared":  # a private folder that holds other files: allowed, and they stay
        shared = folder / "shared"
        canaries += _plant(shared)
        shared.chmod(0o700)
        payload_dir = str(shared)
    else:  # the database's folder, or a link: refused at open (and nothing in them touched)
        if how == "dbdir":
            canaries += _plant(data)
            refused = data
        else:
            target = folder / "shared-target"
            canaries += _plant(target)
            target.chmod(0o700)
            refused = folder / "link"
            refused.symlink_to(target, target_is_directory=True)
        if how == "symlink" or not on_pg:  # a PostgreSQL database has no folder of its own
            _refused(db, refused)
        payload_dir = str(folder / "payloads")
    if not on_pg:
        canaries.append(db)  # the database file itself is not a payload either
    keyring = folder / "keyring.json"
    durableq.Keyring(keyring).create(KEY.removeprefix("alias/"))
    return Place(db, str(keyring), payload_dir, canaries, how)


def _refused(db: str, payload_dir: Path) -> None:
    """A payload store that is not a private folder of its own is refused, before any file is made."""
    try:
        durableq.open(db, payload_dir=payload_dir).close()
    except durableq.InvalidParameterValue:
        return
    raise AssertionError(f"PAYLOAD STORE NOT REFUSED: durableq.open took payload_dir={payload_dir}")


def create_queues(place: Place) -> None:
    with durableq.open(place.db, **place.options) as broker:
        broker.create_queue(STANDARD, visibility_timeout=VISIBILITY, history=True)
        broker.create_queue(
            FIFO, fifo=True, content_based_deduplication=True, visibility_timeout=VISIBILITY, history=True
        )
        broker.create_queue(SEALED, visibility_timeout=VISIBILITY, history=True, kms_master_key_id=KEY)
        broker.create_queue(
            BIG,
            visibility_timeout=VISIBILITY,
            history=True,
            large_payloads=True,
            maximum_message_size=BIG_LIMIT,
        )
        for name in SCRATCH:
            create_scratch(broker, name)
        broker.create_queue(SEALED_SCRATCH, visibility_timeout=VISIBILITY, kms_master_key_id=KEY)
        broker.create_queue(SPIN_DLQ)
        broker.create_queue(IDLE)
        broker.create_queue(
            SPIN, visibility_timeout=VISIBILITY, redrive_policy=durableq.RedrivePolicy(SPIN_DLQ, 1)
        )


def create_scratch(broker: durableq.Broker, name: str) -> durableq.Queue:
    """A scratch queue, always with the same settings (so any process may create it again)."""
    fifo = name.endswith(".fifo")
    extra: dict[str, Any] = {"content_based_deduplication": True} if fifo else {}
    return broker.create_queue(name, fifo=fifo, visibility_timeout=VISIBILITY, **extra)


def canaries_missing(place: Place) -> list[str]:
    """Planted files that are gone or changed."""
    missing = []
    for path in place.canaries:
        if not os.path.exists(path):
            missing.append(path)
        elif path != place.db and not Path(path).read_text().startswith("not a payload"):
            missing.append(f"{path} (changed)")
    return missing
