"""W15: large payloads and encryption at rest.

Part 1, large payloads: a 1 GiB file sent with ``send_file``, received and streamed with
``open_payload()``, and deleted, each step in a fresh child process (so its peak RSS is its own),
side by side with the floor: the same bytes copied with ``shutil.copyfileobj`` and fsynced, read back
and unlinked.  Then a 64 MiB text payload read whole through ``Message.body`` against the same read
streamed through ``open_payload()``: memory grows with the body in the first, stays flat in the second.
The CPU cost of the primitives a payload goes through (AES-256-GCM, SHA-256, MD5) is measured in the
harness's process, to say where the time goes.

Part 2, encryption at rest: the W1 cycle (send → receive → delete, one at a time) and the W2 cycle
(batches of 10) on a plain queue against a queue with ``kms_master_key_id``, messages of 200 bytes with
two attributes, durability normal and full.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import durableq

from .. import procs
from ..compare import collect, in_rounds
from ..model import Config, Measurement, WorkloadResult
from .encryption import BODY, KEY_ALIAS, TURNS, encryption_case
from .payload_steps import (
    CHUNK,
    GIB,
    MIB,
    PAYLOAD_DURABILITY,
    PAYLOAD_QUEUE,
    PEAK,
    RATE,
    SECONDS,
    durableq_receive,
    durableq_send,
    floor_read,
    floor_write,
    random_file,
    read_text,
    text_file,
)

# -- part 1: large payloads, each step in a child process (the steps: payload_steps.py) ------------

#: Free space the 1 GiB part needs (the source, the floor's copy, the payload file, the text payloads,
#: and room to spare); below it the part is skipped and the report says why.
NEEDED = 5 * GIB


def _mib(size: int) -> str:
    return f"{size // GIB} GiB" if size % GIB == 0 else f"{size // MIB} MiB"


#: (case suffix, system) of each step, in the order a round runs them: the systems take turns.
STEPS = {
    "write": ("floor", "durableq"),
    "read": ("floor", "durableq"),
    "delete": ("floor", "durableq"),
}
TEXT_SYSTEMS = ("m.body", "open_payload()")

#: The primitives a payload's bytes go through, measured on 1 MiB chunks in the harness's process.
_PRIMITIVES = ("AES-256-GCM encrypt", "AES-256-GCM decrypt", "SHA-256", "MD5")


def _primitives(total: int) -> dict[str, dict[str, float]]:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead = AESGCM(AESGCM.generate_key(bit_length=256))
    chunk, nonce = os.urandom(CHUNK), bytes(12)
    sealed = aead.encrypt(nonce, chunk, None)
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    work = {
        "AES-256-GCM encrypt": lambda: aead.encrypt(nonce, chunk, None),
        "AES-256-GCM decrypt": lambda: aead.decrypt(nonce, sealed, None),
        "SHA-256": lambda: sha.update(chunk),
        "MD5": lambda: md5.update(chunk),
    }
    rates = {}
    for name in _PRIMITIVES:
        start = time.perf_counter()
        for _ in range(total // CHUNK):
            work[name]()
        rates[name] = {RATE.name: total / MIB / (time.perf_counter() - start)}
    return rates


def _payloads(cfg: Config, keyring: Path) -> tuple[list[Measurement], dict[str, str | None], list[str]]:
    size = cfg.pick(GIB, 16 * MIB)
    text_size = cfg.pick(64 * MIB, 4 * MIB)
    label = _mib(size)
    cases = {step: f"{label} payload, {step}" for step in STEPS}
    text_case = f"{_mib(text_size)} text payload, read"
    primitives_case = "CPU per 1 MiB chunk, one core"
    references: dict[str, str | None] = {case: "floor" for case in cases.values()}
    references[text_case] = None
    references[primitives_case] = None
    need = cfg.pick(NEEDED, 8 * (size + text_size))
    free = shutil.disk_usage(cfg.workdir).free
    if free < need:
        why = f"skipped: {free / GIB:.1f} GiB free in {cfg.workdir.parent}, {need / GIB:.0f} GiB needed"
        skipped = []
        for case, systems in [*((cases[s], STEPS[s]) for s in STEPS), (text_case, TEXT_SYSTEMS)]:
            skipped += [
                Measurement(case, system, SECONDS.name, SECONDS.unit, status=why) for system in systems
            ]
        return skipped, references, [why]

    source, copy = cfg.path("W15", "source.bin"), cfg.path("W15", "floor-copy.bin")
    text = cfg.path("W15", "text.txt")
    db, text_db = cfg.path("W15", "payloads.db"), cfg.path("W15", "text-payloads.db")
    sha256 = random_file(source, size)
    text_file(text, text_size)
    for path in (db, text_db):
        with durableq.open(path, durability=PAYLOAD_DURABILITY, keyring=keyring) as broker:
            broker.create_queue(PAYLOAD_QUEUE, large_payloads=True)
    timeout = 600

    def one_round() -> dict[tuple[str, str], dict[str, float]]:
        values: dict[tuple[str, str], dict[str, float]] = {}
        ((written,), _) = procs.run([(floor_write, (source, copy))], timeout)
        values[cases["write"], "floor"] = written
        ((sent,), _) = procs.run([(durableq_send, (db, keyring, source))], timeout)
        values[cases["write"], "durableq"] = sent
        (((read, unlinked),), _) = procs.run([(floor_read, (copy, size, sha256))], timeout)
        values[cases["read"], "floor"], values[cases["delete"], "floor"] = read, unlinked
        (((received, deleted),), _) = procs.run([(durableq_receive, (db, keyring, size, sha256))], timeout)
        values[cases["read"], "durableq"], values[cases["delete"], "durableq"] = received, deleted
        with durableq.open(text_db, durability=PAYLOAD_DURABILITY, keyring=keyring) as broker:
            queue = broker.get_queue(PAYLOAD_QUEUE)
            for how, system in zip(("body", "stream"), TEXT_SYSTEMS):
                queue.send_file(text)  # untimed: what is measured is the reading
                ((values[text_case, system],), _) = procs.run(
                    [(read_text, (text_db, keyring, text_size, how))], timeout
                )
        for name, rate in _primitives(cfg.pick(256 * MIB, 16 * MIB)).items():
            values[primitives_case, name] = rate
        return values

    try:
        results = in_rounds(cfg.rounds, "W15 payloads", one_round)
    finally:
        for path in (source, copy, text):
            path.unlink(missing_ok=True)
    exact = all(v.get("exact", 1.0) for rounds in results.values() for v in rounds)

    def by_system(case: str, systems: tuple[str, ...]) -> dict[str, list[dict[str, float]]]:
        return {system: results[case, system] for system in systems}

    measurements = []
    for step, systems in STEPS.items():
        metrics = (SECONDS,) if step == "delete" else (SECONDS, RATE, PEAK)
        measurements += collect(cases[step], systems, metrics, by_system(cases[step], systems), {})
    measurements += collect(text_case, TEXT_SYSTEMS, (SECONDS, PEAK), by_system(text_case, TEXT_SYSTEMS), {})
    measurements += collect(
        primitives_case, _PRIMITIVES, (RATE,), by_system(primitives_case, _PRIMITIVES), {}
    )
    notes = [
        f"Payload steps: durability={PAYLOAD_DURABILITY}, a fresh child process per step; peak RSS growth is "
        + (
            "exact (the high-water mark is reset through /proc/self/clear_refs before the step)."
            if exact
            else "an upper bound (the process's ru_maxrss minus its RSS before the step: "
            "/proc/self/clear_refs refused the reset)."
        ),
        "The reads come from the page cache (each file was written just before, and fits in memory): they "
        "show the CPU cost of decrypting and checking, not the disk's speed.",
    ]
    return measurements, references, notes


# -- the workload: part 1 above, part 2 (encryption at rest) in encryption.py -----------------------


def run(cfg: Config) -> WorkloadResult:
    keyring = cfg.path("W15", "keyring.json")
    durableq.Keyring(keyring).create(KEY_ALIAS)
    measurements, references, notes = _payloads(cfg, keyring)
    counts = {
        ("single", "normal"): cfg.pick(300, 20),
        ("single", "full"): cfg.pick(60, 5),
        ("batches of 10", "normal"): cfg.pick(60, 3),
        ("batches of 10", "full"): cfg.pick(15, 2),
    }
    for (shape, durability), count in counts.items():
        measurements += encryption_case(cfg, keyring, shape, durability, count)
    size, text_size = cfg.pick((GIB, 64 * MIB), (16 * MIB, 4 * MIB))
    return WorkloadResult(
        "W15",
        "large payloads and encryption at rest",
        f"Payloads: per round, in turns, each step in a fresh child process: `send_file` of a {_mib(size)} "
        "file of random bytes against the floor's `shutil.copyfileobj` to a new file + fsync (write); "
        "`receive` + streaming `open_payload()` 1 MiB at a time through SHA-256 (checked against the "
        "source) against a plain read of the floor's copy through SHA-256 (read); `delete` (the row and "
        f"its file) against `os.unlink` (delete).  A {_mib(text_size)} text payload read whole through "
        "`m.body` against streamed through `open_payload()`.  The primitives' CPU rate on 1 MiB chunks.  "
        "Encryption: the W1 cycle (send, receive, delete one message) and the W2 cycle (batches of 10) of "
        f"{len(BODY)}-byte messages with 2 attributes on a plain queue and on one with "
        "`kms_master_key_id`; per round, each system runs "
        + ", ".join(f"{n} {shape} cycles (durability={d})" for (shape, d), n in counts.items())
        + f" in {cfg.pick(TURNS, 2)} turns, taking turns with the other.",
        measurements,
        reference="plain",
        case_references=references,
        unrated=(PEAK.name,),
        notes=notes,
    )
