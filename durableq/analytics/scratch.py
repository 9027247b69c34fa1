"""The scratch folder of one run (a snapshot's copy of the database), cleaned up after killed runs.

A copy of a SQLite file is as big as the file, and a run killed before it closed its snapshot
(SIGKILL, the OOM killer, a power cut) cannot remove it.  So each run works in a folder of its own,
``durableq-run-XXXXXXXX`` under one root (the snapshot folder, else the system temp folder), with a
marker that names its owner: host, process id and the process's start time.  Every run first
removes the run folders of the root whose owner is gone: only folders that carry a marker durableq
wrote, owned by this OS user, of a process of this host that no longer runs (a process id reused
since is told apart by its start time).  Anything else under the root is never touched.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

from .. import limits

log = logging.getLogger(__name__)

#: The name of a run folder starts with this.
PREFIX = "durableq-run-"
#: The marker in each run folder: ``{"host", "pid", "started"}`` of the process that made it.
MARKER = ".durableq-run.json"


def run_folder(directory: str | os.PathLike[str] | None) -> Path:
    """A new run folder under ``directory`` (default: the system temp folder), after removing the
    folders of runs that were killed there.  In a given ``directory`` (storage that executors of
    other OS users read) it is :data:`~durableq.limits.SNAPSHOT_SHARED_DIR_MODE`, else private."""
    root = Path(tempfile.gettempdir() if directory is None else directory)
    sweep(root)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    try:
        if directory is not None:
            folder.chmod(limits.SNAPSHOT_SHARED_DIR_MODE)
        (folder / MARKER).write_text(json.dumps(_owner(os.getpid())))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def remove(folder: Path) -> None:
    """Remove a run folder this process made (when its run ends)."""
    shutil.rmtree(folder, ignore_errors=True)


def sweep(root: Path) -> list[Path]:
    """Remove the run folders under ``root`` whose owner process is gone; the folders removed."""
    removed = []
    with contextlib.suppress(OSError):
        for folder in root.glob(f"{PREFIX}*"):
            if _abandoned(folder):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
                log.info("removed %s, left by a run that ended without cleaning up", folder)
    return removed


def _abandoned(folder: Path) -> bool:
    try:
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False  # a symbolic link, a file, another user's: not ours to remove
        owner = json.loads((folder / MARKER).read_text())
        host, pid = owner["host"], owner["pid"]
        if set(owner) != {"host", "pid", "started"} or not isinstance(pid, int):
            return False  # not a marker durableq wrote
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no marker, or not one durableq wrote
    if host != socket.gethostname():
        return False  # another host's run (a shared folder): it may still run
    return bool(_owner(pid) != owner)


def _owner(pid: int) -> dict[str, object]:
    """The marker of process ``pid`` as it is now (``started`` None: no such process)."""
    return {"host": socket.gethostname(), "pid": pid, "started": _start_time(pid)}


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (None: it does not run), as exact as the system tells."""
    try:
        # Linux: field 22 of /proc/PID/stat, after the command name in parentheses.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
    except (OSError, IndexError):
        pass
    try:  # elsewhere: whether it runs, not when it started
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "running"
