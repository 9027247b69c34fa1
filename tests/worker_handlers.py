"""Handlers the worker tests run, in threads or in worker processes (so: importable).

A message body is JSON naming a log file; the handler appends "start" and
"end" lines there (one short append each, atomic with O_APPEND), so a test
can see which process ran which job and when.
"""

from __future__ import annotations

import gc
import json
import os
import time

import durableq


def _log(path: str, event: str, job: str) -> None:
    line = f"{event} {job} {os.getpid()} {time.time():.6f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


#: How long a job waits at most for its ``until`` file.
GATE_TIMEOUT = 60.0


def record(message: durableq.Message) -> None:
    """Log the job, sleep as long as it says, wait for its ``until`` file if it names one
    (the test creates it to let the job end), fail if it says so."""
    job = json.loads(message.body)
    _log(job["log"], "start", job["id"])
    time.sleep(job.get("sleep", 0))
    if "until" in job:
        deadline = time.monotonic() + GATE_TIMEOUT
        while not os.path.exists(job["until"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job['id']}: {job['until']} did not appear")
            time.sleep(0.01)
    if job.get("fail"):
        _log(job["log"], "fail", job["id"])
        raise RuntimeError(f"job {job['id']} fails on purpose")
    _log(job["log"], "end", job["id"])


def record_opened(message: durableq.Message) -> None:
    """:func:`record`, after noting how this process's brokers were opened (``Broker.options``, as JSON
    lines in ``LOG.opened``): a worker process must open its database as its parent's broker was."""
    job = json.loads(message.body)
    for broker in [o for o in gc.get_objects() if isinstance(o, durableq.Broker)]:
        options = broker.options
        opened = {
            "pid": os.getpid(),
            "location": options.location,
            "durability": options.durability,
            "busy_timeout": options.busy_timeout,
            "keyring": None if options.keyring is None else str(options.keyring.path),
            "payload_dir": None if options.payload_dir is None else str(options.payload_dir),
            "clock": getattr(options.clock, "__qualname__", repr(options.clock)),
        }
        fd = os.open(f"{job['log']}.opened", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(opened) + "\n").encode())
        finally:
            os.close(fd)
    record(message)


def wall_clock() -> float:
    """A broker clock that a worker process can be given (a module-level function pickles)."""
    return time.time()


def events(path: str) -> list[tuple[str, str, int, float]]:
    """The lines a handler logged: (event, job id, pid, time)."""
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [(e, j, int(p), float(t)) for e, j, p, t in (line.split() for line in handle if line.strip())]


def reply_upper(message: durableq.Message) -> str:
    """A responder's handler (``--respond``): the reply is the request's body in capitals."""
    return message.body.upper()


def reply_upper_slowly(message: durableq.Message) -> str:
    """:func:`reply_upper` taking 20 ms, so that a responder killed at random is often mid-work."""
    time.sleep(0.02)  # the job's own work, for the crash test; nothing waits on it
    return reply_upper(message)
