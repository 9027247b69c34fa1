"""Outputs on a local (or mounted) file system that Spark's executors write as another OS user.

The rule (docs/analytics.md, "Outputs on a cluster"): the driver's OS user and the executors' share a
group, and the output folder, or the nearest existing folder above it, belongs to that group and
has the setgid bit (``chgrp spark DIR; chmod 2775 DIR``).  Such a folder is how an operator says
"shared"; durableq then does the rest:

- the folders it makes itself (the incremental export's table folders) are made ``2775``;
- Spark's writes under it run with Hadoop's ``fs.permissions.umask-mode`` at ``002``.

Why the second: Hadoop's local file system sets the mode of every folder and file it makes itself
(a ``chmod`` after the ``mkdir``), from that setting (``022`` unless told), not from the process's
umask.  So whatever the folder around allows, the driver's folders (the batch writer's
``_temporary``, the sink's table folder) came out ``0755``, and the executors' user could not make
its task folders in them ("Mkdirs failed").  With ``002`` they are group-writable; the setgid bit,
which Hadoop's ``chmod`` keeps, hands the folder's group down to everything made under it, by either
user, so each can write, rename and remove in the other's folders.  Without the setgid folder
nothing changes (outputs stay ``0755``/``0644``, as Spark makes them), and a write the executors
cannot do fails with one clear error (:func:`explain_write_failure`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from .. import limits
from .errors import AnalyticsError

#: Hadoop's setting of the mode bits it clears from the folders and files it makes.
UMASK_SETTING = "fs.permissions.umask-mode"
#: The Hadoop settings of Spark's writes under a shared folder (see :func:`group_writable`).
_SHARED_SETTINGS = {UMASK_SETTING: limits.SHARED_OUTPUT_UMASK, "fs.file.impl.disable.cache": "true"}

#: How Hadoop's file system says a folder could not be made (the executors' user may not write there).
_MKDIRS_FAILED = re.compile(r"Mkdirs failed to create (?:file:)?(\S+)")
#: What to do when executors that run as another OS user cannot write the output (docs/analytics.md).
OUTPUT_RULE = (
    "Spark's executors cannot write in the folders the driver makes there: on a local or mounted file "
    "system, either the driver and the executors write as the same OS user, or both users share a group "
    "that owns the output folder (or the folder above it) with the setgid bit (chgrp GROUP DIR; chmod 2775 "
    "DIR: durableq then makes Spark's folders group-writable), or write to storage such as HDFS or S3 (an "
    "hdfs:// or s3a:// folder); see 'Outputs on a cluster' in the analytics docs"
)


def shared(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` (a local path; a URL is not) is, or would be made, in a shared folder: the
    nearest existing folder on its path has the setgid bit."""
    if "://" in str(target):
        return False
    folder = Path(target).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and bool(mode & stat.S_ISGID)


def make_folder(folder: Path) -> None:
    """Make ``folder`` and the missing folders above it; under a shared folder, each one made
    ``2775`` (its group comes from the setgid folder above)."""
    if folder.is_dir() or not shared(folder):
        folder.mkdir(parents=True, exist_ok=True)
        return
    missing = [f for f in (folder, *folder.parents) if not f.exists()]
    for made in reversed(missing):
        made.mkdir(exist_ok=True)
        made.chmod(limits.SHARED_OUTPUT_DIR_MODE)  # mkdir's mode passes through the process's umask


@contextmanager
def group_writable(spark: SparkSession, target: str | os.PathLike[str] | None) -> Iterator[None]:
    """Spark's writes in this block make group-writable folders and files if ``target`` is in a shared
    folder, unless the session sets Hadoop's umask itself (``spark.hadoop.fs.permissions.umask-mode``
    or ``fs.permissions.umask-mode``): the session's setting is restored afterwards."""
    given = any(
        spark.conf.get(key, None) is not None for key in (UMASK_SETTING, f"spark.hadoop.{UMASK_SETTING}")
    )
    if target is None or given or not shared(target):
        yield
        return
    # Session settings: Spark copies them into the Hadoop configuration of each write job, which the
    # executors receive with their tasks.  Hadoop's local file system reads the umask from the
    # configuration it was first made with, and keeps that instance for the process (the driver
    # has one already): so uncached, each write job gets one made with this setting.
    ours = [key for key in _SHARED_SETTINGS if spark.conf.get(key, None) is None]
    for key in ours:
        spark.conf.set(key, _SHARED_SETTINGS[key])
    try:
        yield
    finally:
        for key in ours:
            spark.conf.unset(key)


def explain_write_failure(out_dir: str | os.PathLike[str], exc: BaseException) -> None:
    """Raise a clear error if ``exc`` (Spark's failure) says a folder under ``out_dir`` could not be
    made or written."""
    # A streaming query's failure names only the task that failed; Hadoop's "Mkdirs failed" is in the
    # causes of the JVM's exception, which PySpark keeps as text beside it.
    text = f"{exc}\n{getattr(exc, '_stackTrace', '')}"
    target = for_spark(out_dir)
    failed = _MKDIRS_FAILED.search(text)
    if failed is None and not (target in text and "Permission denied" in text):
        return
    why = f"could not make {failed.group(1)}" if failed is not None else "permission denied"
    raise AnalyticsError(f"Spark could not write under {out_dir} ({why}); {OUTPUT_RULE}") from exc


def for_spark(out_dir: str | os.PathLike[str]) -> str:
    """``out_dir`` as Spark should see it: a URL as it is, a local path made absolute here.

    Spark resolves a relative path against the JVM's working directory, which is
    not this process's when the session was started elsewhere (or moved on).
    """
    text = str(out_dir).rstrip("/")
    return text if "://" in text else str(Path(text).resolve())
