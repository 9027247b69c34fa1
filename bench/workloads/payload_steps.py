"""W15's large-payload steps, each run by the workload in a fresh child process (so its peak RSS is
its own): the floor's copy, read and unlink beside durableq's ``send_file``, streaming receive and
delete, and a text payload read whole or streamed; with the files they work on.  Every step returns
its time, rate and, where it matters, the growth of its process's peak RSS.
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import durableq

from ..compare import Metric

MIB = 1024 * 1024
GIB = 1024 * MIB
#: What the harness reads and writes at a time (the library's payload chunk is 1 MiB too).
CHUNK = MIB

SECONDS = Metric("time", "s", "lower")
RATE = Metric("rate", "MiB/s")
PEAK = Metric("peak RSS growth", "MiB", "lower")

#: Durability of the payload part: a returned send_file is on disk, as the floor's fsynced copy is.
PAYLOAD_DURABILITY = "full"
PAYLOAD_QUEUE = "big"

# -- measuring a step ------------------------------------------------------------------------------


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


# -- the steps, each run in a child process by procs.run -------------------------------------------


def floor_write(ready: Callable[[], None], source: Path, target: Path) -> dict[str, float]:
    ready()
    peak = _Peak()

    def work() -> int:
        with open(source, "rb") as src, open(target, "xb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
            dst.flush()
            os.fsync(dst.fileno())
            return dst.tell()

    return _timed(work, peak)


def floor_read(
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


def durableq_send(ready: Callable[[], None], db: Path, keyring: Path, source: Path) -> dict[str, float]:
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


def durableq_receive(
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


def read_text(ready: Callable[[], None], db: Path, keyring: Path, size: int, how: str) -> dict[str, float]:
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


# -- the files they work on --------------------------------------------------------------------------


def random_file(path: Path, size: int) -> str:
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


def text_file(path: Path, size: int) -> None:
    """``size`` bytes of ASCII text (hex of random bytes), so ``Message.body`` can decode it."""
    with open(path, "x", encoding="ascii") as f:
        for _ in range(size // CHUNK):
            f.write(os.urandom(CHUNK // 2).hex())
        f.flush()
        os.fsync(f.fileno())
