"""A throw-away PostgreSQL cluster for the tests and the benchmark: ``initdb`` + ``pg_ctl`` on a
temporary folder (in the system temp folder, or in ``parent``), listening on a Unix socket in that
folder and on loopback only.

Uses the distribution's server binaries (Debian: ``/usr/lib/postgresql/N/bin``, installed by
``scripts/install-system-deps``; ``DURABLEQ_PG_BIN`` points elsewhere).  PostgreSQL refuses to run
as root, so under root the server runs as the ``postgres`` user of the package.  Never skipped:
when the server cannot start, :func:`start` raises with its log.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class ClusterError(RuntimeError):
    """The cluster could not be made or started (the message holds the server's own words)."""


def server_bin() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``."""
    configured = os.environ.get("DURABLEQ_PG_BIN")
    if configured:
        return Path(configured)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not versions:
        raise ClusterError(
            "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: run "
            "scripts/install-system-deps (Debian package 'postgresql'), or point DURABLEQ_PG_BIN at their "
            "folder"
        )
    return Path(versions[-1]).parent


@dataclass
class Cluster:
    """A running cluster; :meth:`url` names a database in it."""

    folder: Path
    port: int
    user: str
    bin: Path
    run_as: str | None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        _run(self, [str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "stop"])
        shutil.rmtree(self.folder, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run(cluster: Cluster, argv: list[str]) -> subprocess.CompletedProcess[str]:
    if cluster.run_as is not None:
        argv = ["runuser", "-u", cluster.run_as, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _reachable(folder: Path, user: str) -> None:
    """Make sure ``user`` (the server's) can reach ``folder``: ``folder`` itself, which the caller
    handed over for the cluster, gets search permission for others if it lacks it; a folder above it
    that ``user`` cannot pass through is an error (its permissions are not ours to change)."""
    entry = pwd.getpwnam(user)
    mode = folder.stat().st_mode
    if not mode & stat.S_IXOTH:
        folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
    for above in folder.resolve().parents:
        info = above.stat()
        if info.st_uid == entry.pw_uid:
            passable = bool(info.st_mode & stat.S_IXUSR)
        elif info.st_gid == entry.pw_gid:
            passable = bool(info.st_mode & stat.S_IXGRP)
        else:
            passable = bool(info.st_mode & stat.S_IXOTH)
        if not passable:
            raise ClusterError(
                f"the server runs as {user!r}, which cannot pass through {above} "
                f"(mode {stat.filemode(info.st_mode)}) to reach {folder}: pick a parent folder it can reach"
            )


def start(
    *, fsync: bool = True, settings: dict[str, str] | None = None, parent: Path | None = None
) -> Cluster:
    """Make and start a new cluster (``fsync=False``: faster, for tests that kill no machine).

    ``parent``: the folder to make the cluster's folder in (default: the system temp folder), e.g.
    on the filesystem whose fsync a benchmark means to measure.  Under root, ``parent`` gets search
    permission for others, so that the server's user can reach its data.
    """
    bin_dir = server_bin()
    run_as = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError as exc:
            raise ClusterError(
                "running as root and there is no 'postgres' user to run the server as"
            ) from exc
        run_as = "postgres"
    if parent is not None and run_as is not None:
        _reachable(Path(parent), run_as)
    folder = Path(tempfile.mkdtemp(prefix="durableq-pg-", dir=parent))
    folder.chmod(0o755)
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    user = run_as or pwd.getpwuid(os.geteuid()).pw_name
    cluster = Cluster(folder, _free_port(), user, bin_dir, run_as)
    made = _run(
        cluster,
        [
            str(bin_dir / "initdb"),
            "-D",
            str(folder / "data"),
            "-U",
            user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ],
    )
    if made.returncode != 0:
        raise ClusterError(f"initdb failed: {made.stderr.strip() or made.stdout.strip()}")
    options = {
        "listen_addresses": "127.0.0.1",
        "port": str(cluster.port),
        "unix_socket_directories": str(folder),
        "max_connections": "300",
        "fsync": "on" if fsync else "off",
        "synchronous_commit": "on" if fsync else "off",
        "full_page_writes": "on" if fsync else "off",
        "shared_buffers": "128MB",
        **(settings or {}),
    }
    with open(folder / "data" / "postgresql.conf", "a") as conf:
        conf.writelines(f"{key} = '{value}'\n" for key, value in options.items())
    started = _run(
        cluster,
        [str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-l", str(folder / "log"), "-w", "start"],
    )
    if started.returncode != 0:
        log = (folder / "log").read_text() if (folder / "log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise ClusterError(f"pg_ctl start failed: {started.stderr.strip()} {log.strip()}")
    return cluster


_databases = itertools.count()


def create_database(cluster: Cluster, name: str | None = None, *, template: str | None = None) -> str:
    """A new database in ``cluster`` (a copy of ``template`` if given); returns its name."""
    import psycopg

    name = name or f"t{os.getpid()}_{next(_databases)}"
    copy = f" TEMPLATE {template} STRATEGY FILE_COPY" if template else ""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}{copy}")
    return name


def drop_database(cluster: Cluster, name: str) -> None:
    """Drop ``name``, ending any connection a test left open to it."""
    import psycopg

    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
