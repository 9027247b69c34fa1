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
import re
import resource
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import durableq

from .. import procs
from ..compare import Metric, collect, in_rounds
from ..model import Config, Measurement, WorkloadResult

MIB = 1024 * 1024
GIB = 1024 * MIB
#: What the harness reads and writes at a time (the library's payload chunk is 1 MiB too).
CHUNK = MIB
#: Free space the 1 GiB part needs (the source, the floor's copy, the payload file, the text payloads,
#: and room to spare); below it the part is skipped and the report says why.
NEEDED = 5 * GIB

SECONDS = Metric("time", "s", "lower")
RATE = Metric("rate", "MiB/s")
PEAK = Metric("peak RSS growth", "MiB", "lower")
THROUGHPUT = Metric("throughput", "msg/s")

#: Durability of the payload part: a returned send_file is on disk, as the floor's fsynced copy is.
PAYLOAD_DURABILITY = "full"
PAYLOAD_QUEUE = "big"
KEY_ALIAS = "bench"

# -- part 1: large payloads, each step in a child process -----------------------------------------


def _status() -> str:
    with open("/proc/self/status", encoding="ascii") as f:
        return f.read()


def _kib(field: str) -> int:
    found = re.search(rf"^{field}:\s+(\d+) kB", _status(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"/proc/self/status has no {field}")
    return int(found.group(1))


class _Peak:
    """The growth of this process's peak RSS over a stretch of work.

    On Linux, writing 5 to ``/proc/self/clear_refs`` resets the high-water mark (VmHWM) to the current
    RSS, so VmHWM after the work minus the RSS before it is exactly the most memory the work added.
    Where that is refused, the peak of the whole process (``ru_maxrss``, imports included) minus the RSS
    before is an upper bound.
    """

    def __init__(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            self.exact = True
        except OSError:
            self.exact = False
        self._before = _kib("VmRSS")

    def growth(self) -> float:
        if self.exact:
            # VmHWM, not ru_maxrss: getrusage also counts the peak recorded when any thread of the
            # process exited (multiprocessing's helpers do), which the reset does not clear.
            peak = _kib("VmHWM")
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return max(0, peak - self._before) / 1024


def _timed(work: Callable[[], int], peak: _Peak | None = None) -> dict[str, float]:
    """Time ``work`` (which returns the bytes it moved) and, if given, the peak RSS growth over it."""
    start = time.perf_counter()
    moved = work()
    seconds = time.perf_counter() - start
    values = {SECONDS.name: seconds, RATE.name: moved / MIB / seconds, "bytes": moved}
    if peak is not None:
        values[PEAK.name] = peak.growth()
        values["exact"] = float(peak.exact)
    return values


def _hash_stream(stream: BinaryIO, size: int, sha256: str, what: str) -> int:
    """Read ``stream`` to its end, 1 MiB at a time, into SHA-256; it must hold ``size`` bytes hashing
    to ``sha256``."""
    digest, moved = hashlib.sha256(), 0
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
        moved += len(chunk)
    if moved != size or digest.hexdigest() != sha256:
        raise RuntimeError(f"{what}: read {moved} bytes that do not match the {size} bytes sent")
    return moved


def _floor_write(ready: Callable[[], None], source: Path, target: Path) -> dict[str, float]:
    ready()
    peak = _Peak()

    def work() -> int:
        with open(source, "rb") as src, open(target, "xb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
            dst.flush()
            os.fsync(dst.fileno())
            return dst.tell()

    return _timed(work, peak)


def _floor_read(
    ready: Callable[[], None], path: Path, size: int, sha256: str
) -> tuple[dict[str, float], dict[str, float]]:
    """Read the floor's copy back (hashing it, as the durableq consumer does), then unlink it."""
    ready()
    peak = _Peak()

    def read() -> int:
        with open(path, "rb") as f:
            return _hash_stream(f, size, sha256, "the floor's copy")

    def unlink() -> int:
        os.unlink(path)
        return size

    return _timed(read, peak), _timed(unlink)


def _open(db: Path, keyring: Path, queue: str) -> tuple[durableq.Broker, durableq.Queue]:
    broker = durableq.open(db, durability=PAYLOAD_DURABILITY, keyring=keyring)
    return broker, broker.get_queue(queue)


def _durableq_send(ready: Callable[[], None], db: Path, keyring: Path, source: Path) -> dict[str, float]:
    broker, queue = _open(db, keyring, PAYLOAD_QUEUE)
    ready()
    peak = _Peak()

    def work() -> int:
        queue.send_file(source)
        return source.stat().st_size

    try:
        return _timed(work, peak)
    finally:
        broker.close()


def _payload_files(broker: durableq.Broker) -> list[Path]:
    root = broker.payload_dir
    if not root.is_dir():
        return []
    return [
        f for folder in root.iterdir() if folder.is_dir() and folder.name != "tmp" for f in folder.iterdir()
    ]


def _durableq_receive(
    ready: Callable[[], None], db: Path, keyring: Path, size: int, sha256: str
) -> tuple[dict[str, float], dict[str, float]]:
    """Receive the payload and stream it through SHA-256 (checked against the source), then delete it
    (the row and its file)."""
    broker, queue = _open(db, keyring, PAYLOAD_QUEUE)
    ready()
    peak = _Peak()
    handles: list[str] = []

    def receive() -> int:
        (message,) = queue.receive()
        if message.payload_size != size:
            raise RuntimeError(f"payload_size is {message.payload_size}, {size} bytes were sent")
        handles.append(message.receipt_handle)
        with message.open_payload() as stream:
            return _hash_stream(stream, size, sha256, "open_payload()")

    def delete() -> int:
        queue.delete(handles[0])
        return size

    try:
        read = _timed(receive, peak)
        deleted = _timed(delete)
        if left := _payload_files(broker):
            raise RuntimeError(f"delete left the payload file(s) {left}")
        return read, deleted
    finally:
        broker.close()


def _read_text(ready: Callable[[], None], db: Path, keyring: Path, size: int, how: str) -> dict[str, float]:
    """Receive a text payload and read it whole through ``m.body``, or stream it through
    ``open_payload()`` (1 MiB at a time, into a sink); then delete it (untimed)."""
    broker, queue = _open(db, keyring, PAYLOAD_QUEUE)
    ready()
    peak = _Peak()
    handles: list[str] = []

    def work() -> int:
        (message,) = queue.receive()
        handles.append(message.receipt_handle)
        if how == "body":
            return len(message.body)  # ASCII: characters are bytes
        moved = 0
        with message.open_payload() as stream:
            while chunk := stream.read(CHUNK):
                moved += len(chunk)
        return moved

    try:
        values = _timed(work, peak)
        if values["bytes"] != size:
            raise RuntimeError(f"{how}: read {values['bytes']:.0f} of {size} bytes")
        queue.delete(handles[0])
        return values
    finally:
        broker.close()


def _random_file(path: Path, size: int) -> str:
    """Write ``size`` random bytes (1 MiB at a time), fsynced so no write-back of it overlaps the
    timings; returns their SHA-256."""
    digest = hashlib.sha256()
    with open(path, "xb") as f:
        for _ in range(size // CHUNK):
            chunk = os.urandom(CHUNK)
            digest.update(chunk)
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    return digest.hexdigest()


def _text_file(path: Path, size: int) -> None:
    """``size`` bytes of ASCII text (hex of random bytes), so ``Message.body`` can decode it."""
    with open(path, "x", encoding="ascii") as f:
        for _ in range(size // CHUNK):
            f.write(os.urandom(CHUNK // 2).hex())
        f.flush()
        os.fsync(f.fileno())


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
    sha256 = _random_file(source, size)
    _text_file(text, text_size)
    for path in (db, text_db):
        with durableq.open(path, durability=PAYLOAD_DURABILITY, keyring=keyring) as broker:
            broker.create_queue(PAYLOAD_QUEUE, large_payloads=True)
    timeout = 600

    def one_round() -> dict[tuple[str, str], dict[str, float]]:
        values: dict[tuple[str, str], dict[str, float]] = {}
        ((written,), _) = procs.run([(_floor_write, (source, copy))], timeout)
        values[cases["write"], "floor"] = written
        ((sent,), _) = procs.run([(_durableq_send, (db, keyring, source))], timeout)
        values[cases["write"], "durableq"] = sent
        (((read, unlinked),), _) = procs.run([(_floor_read, (copy, size, sha256))], timeout)
        values[cases["read"], "floor"], values[cases["delete"], "floor"] = read, unlinked
        (((received, deleted),), _) = procs.run([(_durableq_receive, (db, keyring, size, sha256))], timeout)
        values[cases["read"], "durableq"], values[cases["delete"], "durableq"] = received, deleted
        with durableq.open(text_db, durability=PAYLOAD_DURABILITY, keyring=keyring) as broker:
            queue = broker.get_queue(PAYLOAD_QUEUE)
            for how, system in zip(("body", "stream"), TEXT_SYSTEMS):
                queue.send_file(text)  # untimed: what is measured is the reading
                ((values[text_case, system],), _) = procs.run(
                    [(_read_text, (text_db, keyring, text_size, how))], timeout
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


# -- part 2: encryption at rest, the W1 and W2 cycles -------------------------------------------------

ENCRYPTION_SYSTEMS = ("plain", "encrypted")
QUEUE = "jobs"
BODY = ("order 4711 for customer c-0815: " * 7)[:200]
ATTRIBUTES = {"customer": "c-0815", "priority": 3}
BATCH = 10
TURNS = 8


class _Cycles:
    """A queue of its own file, plain or encrypted under the keyring's master key."""

    def __init__(self, path: Path, durability: str, keyring: Path, encrypted: bool) -> None:
        self.broker = durableq.open(path, durability=durability, keyring=keyring)
        settings = {"kms_master_key_id": f"alias/{KEY_ALIAS}"} if encrypted else {}
        self.queue = self.broker.create_queue(QUEUE, **settings)
        self.entries = [durableq.SendEntry(str(i), BODY, attributes=ATTRIBUTES) for i in range(BATCH)]

    def single(self, count: int) -> float:
        queue = self.queue
        start = time.perf_counter()
        for _ in range(count):
            queue.send(BODY, attributes=ATTRIBUTES)
            (message,) = queue.receive()
            queue.delete(message.receipt_handle)
        return count / (time.perf_counter() - start)

    def batched(self, count: int) -> float:
        queue = self.queue
        start = time.perf_counter()
        for _ in range(count):
            if queue.send_batch(self.entries).failed:
                raise RuntimeError("send_batch failed")
            handles: list[str] = []
            while len(handles) < BATCH:  # a receive may return fewer than asked for
                handles += [m.receipt_handle for m in queue.receive(max_messages=BATCH - len(handles))]
            if queue.delete_batch(handles).failed:
                raise RuntimeError("delete_batch failed")
        return count * BATCH / (time.perf_counter() - start)

    def close(self) -> None:
        self.broker.close()


def _encryption_case(
    cfg: Config, keyring: Path, shape: str, durability: str, count: int
) -> list[Measurement]:
    case = f"{shape}, durability={durability}"
    cycles = {
        name: _Cycles(
            cfg.path("W15", shape.replace(" ", "_"), durability, name), durability, keyring, name != "plain"
        )
        for name in ENCRYPTION_SYSTEMS
    }
    turns = cfg.pick(TURNS, 2)

    def run(name: str, n: int) -> float:
        c = cycles[name]
        return c.single(n) if shape == "single" else c.batched(n)

    def one_round() -> dict[str, dict[str, float]]:
        # The systems take turns inside the round; its rate is its turns' messages over their time.
        rates: dict[str, list[float]] = {name: [] for name in ENCRYPTION_SYSTEMS}
        for _ in range(turns):
            for name in ENCRYPTION_SYSTEMS:
                rates[name].append(run(name, count))
        return {name: {THROUGHPUT.name: statistics.harmonic_mean(r)} for name, r in rates.items()}

    try:
        for name in ENCRYPTION_SYSTEMS:
            run(name, 20 if shape == "single" else 2)  # warm-up: statements, the data key
        results = in_rounds(cfg.rounds, f"W15 {case}", one_round)
    finally:
        for c in cycles.values():
            c.close()
    return collect(case, ENCRYPTION_SYSTEMS, [THROUGHPUT], results, {})


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
        measurements += _encryption_case(cfg, keyring, shape, durability, count)
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
