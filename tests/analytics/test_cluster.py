"""A report on a real standalone Spark cluster whose worker runs as another OS user.

The master and the worker are started from PySpark's own launcher
(``bin/spark-class`` with Spark's ``Master`` and ``Worker`` classes) on
127.0.0.1; the worker (so every executor) runs as :data:`WORKER_USER`, created
here when missing (which needs root, as CI has).  ``durableq analyze`` and
``durableq export --incremental`` run in their own process as the driver, with
``--master spark://...``, as a second OS user (:data:`DRIVER_USER`, not root, so
the driver's side of the file permissions is tested too) who shares the worker
user's group.  Outputs go into a folder of that group with the setgid bit, the
rule of docs/analytics.md, "Outputs on a cluster": the executors write the files,
the driver commits them.  Into a folder without it, the write fails with a clear
error.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import site
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import durableq
from durableq.analytics import committed_files

from .test_session import SPARK_HOME

#: The OS user the worker and its executors run as.
WORKER_USER = "durableq-spark"
#: The OS user ``durableq`` runs as (the driver), in :data:`WORKER_USER`'s group.
DRIVER_USER = "durableq-spark-driver"
#: How long the master and the worker get to come up.
START_TIMEOUT = 180.0
DURABLEQ = Path(sys.executable).parent / "durableq"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ensure_user(name: str) -> pwd.struct_passwd:
    """The OS user ``name``, created (without a home or a login shell) if missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    if os.geteuid() != 0:
        pytest.fail(
            f"the cluster test runs its Spark worker as OS user {name!r}, which does not exist, and only "
            f"root can create it: run the tests as root (as CI does) or create the user "
            f"(useradd --system {name})"
        )
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(name)


def spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}


def start(args: list[str], log: Path, user: pwd.struct_passwd | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_env() | ({"HOME": "/tmp", "USER": user.pw_name} if user else {}),
            cwd="/tmp",
            user=None if user is None else user.pw_uid,
            group=None if user is None else user.pw_gid,
            extra_groups=[] if user is not None else None,
            start_new_session=True,  # its own process group: the executors it starts go with it
        )


def master_state(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            state: dict[str, Any] = json.load(response)
            return state
    except OSError:
        return None


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


@dataclass
class Cluster:
    url: str
    user: pwd.struct_passwd
    work_dir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    user = ensure_user(WORKER_USER)
    logs = tmp_path_factory.mktemp("cluster-logs")
    # The worker's own folder (its executors' logs and the jars they fetch) belongs to its user.
    work_dir = Path(tempfile.mkdtemp(prefix="durableq-spark-work-"))
    os.chown(work_dir, user.pw_uid, user.pw_gid)
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    processes = [
        start(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            logs / "master.log",
        )
    ]
    try:
        processes.append(
            start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    "2",
                    "--memory",
                    "2g",
                    "--work-dir",
                    str(work_dir),
                ],
                logs / "worker.log",
                user,
            )
        )
        # Up when the master lists the worker as ALIVE; a process that exits, or a deadline, fails the test.
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            state = master_state(f"http://127.0.0.1:{ui}/json/")
            if state and any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                break
            dead = [p.args[1] for p in processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                tails = {log.name: log.read_text(errors="replace")[-2000:] for log in logs.iterdir()}
                pytest.fail(f"the Spark cluster did not start ({dead or 'timed out'}): {tails}")
            time.sleep(0.5)  # polling the master for the worker's registration, not waiting on luck
        yield Cluster(url, user, work_dir)
    finally:
        for process in reversed(processes):
            stop(process)
        shutil.rmtree(work_dir, ignore_errors=True)


def reachable(path: Path) -> bool:
    """Whether any OS user may run ``path``: every folder on its way open to others, the file too."""
    path = path.resolve()
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


@dataclass
class OtherUsersPython:
    """A Python that the worker's and the driver's users may run, with this environment's packages."""

    interpreter: Path
    #: A folder for ``PYTHONPATH`` whose ``sitecustomize`` adds this environment's site-packages.
    path: Path


@pytest.fixture(scope="module")
def other_users_python() -> Iterator[OtherUsersPython]:
    """This interpreter if others may run it; else the system's of the same version (the executors
    run the events stream's Python: an interpreter in root's home is closed to them)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.executable), Path("/usr/bin") / version, Path("/usr/local/bin") / version]
    interpreter = next((c for c in candidates if c.exists() and reachable(c)), None)
    if interpreter is None:
        pytest.fail(f"no {version} that other OS users may run (tried {', '.join(map(str, candidates))})")
    folder = Path(tempfile.mkdtemp(prefix="durableq-python-"))
    folder.chmod(0o755)
    packages = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (folder / "sitecustomize.py").write_text(
        "import site\n" + "".join(f"site.addsitedir({p!r})\n" for p in packages)
    )
    (folder / "sitecustomize.py").chmod(0o644)
    yield OtherUsersPython(interpreter, folder)
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Driver:
    """Runs ``durableq`` as the driver of an application on the cluster, in its own process."""

    cluster: Cluster
    python: OtherUsersPython
    user: pwd.struct_passwd

    def run(self, path: Path, *args: str, as_root: bool = False) -> subprocess.CompletedProcess[str]:
        """``durableq --db path ARGS --master ...`` as :data:`DRIVER_USER` (in the worker user's group),
        or as root (this environment's ``durableq``); the executors run :attr:`python`."""
        cli = [str(self.python.interpreter), "-m", "durableq"]
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(self.python.interpreter)}
        user: dict[str, Any] = {}
        if as_root:
            cli = [str(DURABLEQ)]
        else:
            env |= {"HOME": "/tmp", "USER": self.user.pw_name, "PYTHONPATH": str(self.python.path)}
            user = {
                "user": self.user.pw_uid,
                "group": self.user.pw_gid,
                "extra_groups": [self.cluster.user.pw_gid],
                "umask": 0o022,
            }
        executors = ["--conf", f"spark.executorEnv.PYTHONPATH={self.python.path}"]
        return subprocess.run(
            [*cli, "--db", str(path), *args, "--master", self.cluster.url, *executors],
            env=env,
            cwd="/tmp",
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            **user,
        )


@pytest.fixture
def driver(cluster: Cluster, other_users_python: OtherUsersPython) -> Driver:
    return Driver(cluster, other_users_python, ensure_user(DRIVER_USER))


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder the worker's user may enter (0711), outside pytest's private temp folders."""
    folder = Path(tempfile.mkdtemp(prefix="durableq-shared-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def group_folder(folder: Path, cluster: Cluster) -> Path:
    """``folder`` made in the worker user's group with the setgid bit (2775): the rule for outputs."""
    folder.mkdir()
    os.chown(folder, 0, cluster.user.pw_gid)
    folder.chmod(0o2775)
    return folder


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr[-4000:]
    return done.stderr.strip().splitlines()[-1]


def library_event_ids(path: Path) -> list[int]:
    with durableq.open(path, durability="normal") as broker:
        return sorted(
            e.event_id for n in broker.list_queues() for e in broker.get_queue(n).events(limit=100_000)
        )


def exported_event_ids(folder: Path) -> list[int]:
    """The event ids in the files the sink's log commits (what every reader of the export reads)."""
    return sorted(pq.read_table([str(f) for f in committed_files(folder)])["event_id"].to_pylist())


@pytest.mark.slow
def test_reports_and_exports_on_a_standalone_cluster_with_executors_as_another_user(
    cluster: Cluster, driver: Driver, shared_dir: Path
) -> None:
    # The database in a folder of the shared group: the export's executors open it (the events stream).
    path = group_folder(shared_dir / "db", cluster) / "queue.db"
    with durableq.open(path, durability="normal") as broker:
        jobs = broker.create_queue("jobs", history=True)
        later = broker.create_queue("later", delay_seconds=900)
        for start_at in range(0, 300, 10):
            assert not jobs.send_batch(
                [durableq.SendEntry(str(i), f"job {start_at + i}") for i in range(10)]
            ).failed
        for _ in range(5):
            jobs.receive(10, visibility_timeout=3_600)
        later.send("in a quarter of an hour")
    path.chmod(0o664)
    snapshots = group_folder(shared_dir / "snapshots", cluster)
    out = group_folder(shared_dir / "out", cluster)
    done = driver.run(
        path,
        "analyze",
        "--report",
        "depth",
        "--json",
        "--snapshot-dir",
        str(snapshots),
        "--partitions",
        "3",
        "--out",
        str(out / "reports"),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    depth = {row["queue"]: row for row in json.loads(done.stdout)["depth"]}
    expected = {"jobs": (250, 50, 0), "later": (0, 0, 1)}
    assert {q: (r["visible"], r["in_flight"], r["delayed"]) for q, r in depth.items()} == expected
    # The reads ran in executors of the worker, as its user: their logs are in its folder, owned by it.
    executor_logs = list(cluster.work_dir.glob("app-*/*/stderr"))
    assert executor_logs, "no executor ran on the worker"
    assert {log.stat().st_uid for log in executor_logs} == {cluster.user.pw_uid}
    assert any("Running task" in log.read_text(errors="replace") for log in executor_logs)
    assert list(snapshots.iterdir()) == []  # the copy is removed afterwards
    # The report as Parquet: written by the executors' user, committed (moved, _temporary removed) by
    # the driver's, all in the shared group.
    written = out / "reports" / "depth"
    parts = list(written.glob("part-*.parquet"))
    assert parts and {p.stat().st_uid for p in parts} == {cluster.user.pw_uid}
    assert not (written / "_temporary").exists() and (written / "_SUCCESS").exists()
    assert {p.stat().st_gid for p in written.rglob("*")} == {cluster.user.pw_gid}
    table = pq.read_table(written).to_pylist()
    assert {r["queue"]: (r["visible"], r["in_flight"], r["delayed"]) for r in table} == expected

    # The incremental export: the executors write the files, the driver the sink's log; each event once.
    exported = driver.run(path, "export", "--incremental", str(out / "history"), "--json")
    assert exported.returncode == 0, exported.stderr[-4000:]
    events = library_event_ids(path)
    run = {r["table"]: r for r in json.loads(exported.stdout)}
    assert (run["events"]["rows"], run["events"]["checkpoint"]) == (len(events), events[-1])
    assert exported_event_ids(out / "history" / "events") == events
    files = committed_files(out / "history" / "events")
    assert files and {f.stat().st_uid for f in files} == {cluster.user.pw_uid}
    assert {p.stat().st_gid for p in (out / "history").rglob("*")} == {cluster.user.pw_gid}

    # Into a folder of the driver's own (0755, no shared group): the executors cannot write there.
    # One clear durableq error naming the folder and the rule, not "a bug in durableq".
    plain = shared_dir / "plain"
    plain.mkdir(mode=0o755)
    os.chown(plain, driver.user.pw_uid, driver.user.pw_gid)
    refused = last_line(
        driver.run(
            path,
            "analyze",
            "--report",
            "depth",
            "--snapshot-dir",
            str(snapshots),
            "--out",
            str(plain / "reports"),
        )
    )
    assert refused.startswith(
        f"error: AnalyticsError: Spark could not write under {plain / 'reports'} (could not make "
    ), refused
    assert "setgid" in refused and "s3a://" in refused and "a bug" not in refused
    refused = last_line(driver.run(path, "export", "--incremental", str(plain / "history")))
    assert refused.startswith(
        f"error: AnalyticsError: Spark could not write under {plain / 'history' / 'events'} (could not make "
    ), refused
    assert "setgid" in refused and "a bug" not in refused
    # Without --snapshot-dir, the copy is private to the driver's user (root here): the executors
    # cannot open it, and say so.
    last = last_line(driver.run(path, "analyze", "--report", "depth", as_root=True))
    assert last.startswith("error: AnalyticsError: Spark could not open the snapshot copy")
    assert "--snapshot-dir" in last
    assert "(permission denied)" in last or "may not enter)" in last, last
