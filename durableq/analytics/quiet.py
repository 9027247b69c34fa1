"""Spark quiet unless asked: the log4j2 settings and the JVM's start-up lines of a session durableq
starts.

Spark logs through log4j2, so the settings file :data:`QUIET_LOG4J` (errors only) given to the
driver's JVM (``-Dlog4j2.configurationFile``) silences its WARN lines.  Some lines come before
log4j2 exists: the JVM itself warns of its incubator modules on every start.  The JVM writes them to
the stderr it inherits from this process, so while PySpark launches it, this process's stderr is a
pipe whose lines a thread passes on to the real stderr, less those start-up lines; the JVM keeps the
pipe for its life, so its later output (errors) still reaches the terminal.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: The log4j2 settings of a quiet session: errors only, on stderr.
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
#: The JVM's own start-up lines (not log4j2's) that a quiet session drops.
JVM_NOISE = (b"WARNING: Using incubator modules:",)
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_LOG4J_PROPERTY = "log4j2.configurationFile"


def quiet_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the driver's JVM told to log errors only, unless it names a log4j2 file itself."""
    options = conf.get(_JAVA_OPTIONS, "")
    if _LOG4J_PROPERTY in options:  # the user's logging settings win
        return dict(conf)
    ours = f"-D{_LOG4J_PROPERTY}={QUIET_LOG4J.resolve().as_uri()}"
    return {**conf, _JAVA_OPTIONS: f"{options} {ours}".strip()}


@contextmanager
def jvm_start_up_filtered() -> Iterator[None]:
    """Run the block (PySpark's launch of the JVM) with stderr passed through a filter of
    :data:`JVM_NOISE`; the JVM started in it keeps the filter for its life."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    terminal = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(
        target=_forward, args=(read_end, terminal), name="durableq-jvm-stderr", daemon=True
    ).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # this process writes to the terminal again; the JVM, to the pipe


def _forward(read_end: int, terminal: int) -> None:
    """Pass the pipe's lines on to ``terminal`` until every writer (the JVM, for one) is gone."""
    with os.fdopen(read_end, "rb") as pipe, os.fdopen(terminal, "wb", buffering=0) as out:
        for line in pipe:
            if not line.startswith(JVM_NOISE):
                out.write(line)
