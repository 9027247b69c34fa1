"""The analytics through Spark Connect: a real Connect server (PySpark's own
``sbin/start-connect-server.sh``, in the foreground, on 127.0.0.1) and a client process whose active
session is a Connect client, which has no ``sparkContext``.  durableq reads that session's settings
through ``session.conf`` and asks its default parallelism with a DataFrame, so the reports run as
they do in a classic session, with the same numbers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from durableq.analytics import find_jdbc_jar, run_report

from . import scenario
from .test_cluster import free_port, stop
from .test_session import SPARK_HOME, spark_environment

#: How long the Connect server gets to come up.
START_TIMEOUT = 240.0

CLIENT = """
import json, sys
from pyspark.sql import SparkSession
from durableq.analytics import run_report

url, path, now = sys.argv[1], sys.argv[2], float(sys.argv[3])
client = SparkSession.builder.remote(url).getOrCreate()
try:
    client.sparkContext
except Exception as exc:  # a Connect client has none: durableq must not need it
    print(type(exc).__name__, file=sys.stderr)
else:
    raise SystemExit("a Connect client with a sparkContext: this is no Connect session")
# No spark= given: the active session (the Connect client) is found and used as it is.
result = run_report(path, "depth", clock=lambda: now)
print(json.dumps({"depth": result["depth"], "master": client.conf.get("spark.master")}, default=str))
"""


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("connect-server")
    port = free_port()
    env = spark_environment() | {
        "SPARK_LOG_DIR": str(folder),
        "SPARK_PID_DIR": str(folder),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    log = folder / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
                "--wait",
                "--master",
                "local[2]",
                "--jars",
                str(find_jdbc_jar()),
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stopped with everything it started
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"the Spark Connect server did not start: {log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.5)  # polling the server's port, not waiting on luck
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop(server)


@pytest.mark.slow
def test_reports_through_a_spark_connect_session(
    connect_url: str, spark: SparkSession, world: scenario.Scenario
) -> None:
    now = world.clock()
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, connect_url, str(world.path), repr(now)],
        env={k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "JVM_ATTRIBUTE_NOT_SUPPORTED" in done.stderr or "PySparkAttributeError" in done.stderr
    printed = json.loads(done.stdout)
    assert printed["master"] == "local[2]"  # the server's session, not one durableq started
    classic = run_report(world.path, "depth", spark=spark, clock=lambda: now)["depth"]
    assert printed["depth"] == json.loads(json.dumps(classic, default=str))
