"""A report on a real standalone Spark cluster whose worker runs as another OS user.

The master and the worker are started from PySpark's own launcher
(``bin/spark-class`` with Spark's ``Master`` and ``Worker`` classes) on
127.0.0.1; the worker (so every executor) runs as :data:`WORKER_USER`, created
here when missing (which needs root, as CI has).  ``durableq analyze`` runs in
its own process as the driver, with ``--master spark://...`` and a
``--snapshot-dir`` that user may enter: the executors read the snapshot copy.
Reports written with ``--out`` fail there with a clear error (docs/analytics.md,
"Outputs on a cluster").
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import durableq

from .test_session import SPARK_HOME

#: The OS user the worker and its executors run as.
WORKER_USER = "durableq-spark"
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


def analyze(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``durableq analyze`` in its own process, as the driver of an application on the cluster."""
    return subprocess.run(
        [str(DURABLEQ), "--db", str(path), "analyze", *args],
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder the worker's user may enter (0711), outside pytest's private temp folders."""
    folder = Path(tempfile.mkdtemp(prefix="durableq-shared-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_reports_on_a_standalone_cluster_with_executors_as_another_user(
    cluster: Cluster, shared_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "queue.db"
    with durableq.open(path, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        later = broker.create_queue("later", delay_seconds=900)
        for start_at in range(0, 300, 10):
            assert not jobs.send_batch(
                [durableq.SendEntry(str(i), f"job {start_at + i}") for i in range(10)]
            ).failed
        for _ in range(5):
            jobs.receive(10, visibility_timeout=3_600)
        later.send("in a quarter of an hour")
    snapshots = shared_dir / "snapshots"
    snapshots.mkdir(mode=0o711)
    out = shared_dir / "reports"
    out.mkdir(mode=0o755)
    done = analyze(
        path,
        "--report",
        "depth",
        "--json",
        "--master",
        cluster.url,
        "--snapshot-dir",
        str(snapshots),
        "--partitions",
        "3",
    )
    assert done.returncode == 0, done.stderr[-4000:]
    depth = {row["queue"]: row for row in json.loads(done.stdout)["depth"]}
    assert {q: (r["visible"], r["in_flight"], r["delayed"]) for q, r in depth.items()} == {
        "jobs": (250, 50, 0),
        "later": (0, 0, 1),
    }
    # The reads ran in executors of the worker, as its user: their logs are in its folder, owned by it.
    executor_logs = list(cluster.work_dir.glob("app-*/*/stderr"))
    assert executor_logs, "no executor ran on the worker"
    assert {log.stat().st_uid for log in executor_logs} == {cluster.user.pw_uid}
    assert any("Running task" in log.read_text(errors="replace") for log in executor_logs)
    assert list(snapshots.iterdir()) == []  # the copy is removed afterwards
    # Reports written (--out) on a local file system: the executors, as their user, cannot write in
    # the folders the driver made (0755, its own): one clear durableq error naming the folder and
    # what to do, not "a bug in durableq".
    unwritable = analyze(
        path,
        "--report",
        "depth",
        "--master",
        cluster.url,
        "--snapshot-dir",
        str(snapshots),
        "--out",
        str(out / "refused"),
    )
    assert unwritable.returncode == 1, unwritable.stderr[-4000:]
    last = unwritable.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"error: AnalyticsError: Spark could not write under {out / 'refused'} (could not make "
    )
    assert "the same OS user" in last and "s3a://" in last and "a bug" not in last
    # Without it, the copy is private to the driver's user: the executors cannot open it, and say so.
    refused = analyze(path, "--report", "depth", "--master", cluster.url)
    assert refused.returncode == 1
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: AnalyticsError: Spark could not open the snapshot copy")
    assert "--snapshot-dir" in last
    assert "(permission denied)" in last or "may not enter)" in last, last
