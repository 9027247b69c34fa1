"""``analyze`` and ``export`` in their own processes: Spark quiet unless ``--verbose``, and ``--conf``
reaching the session durableq starts (which listens on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from durableq.cli import main

import durableq

DURABLEQ = Path(sys.executable).parent / "durableq"


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "queue.db"
    with durableq.open(path, durability="normal") as broker:
        jobs = broker.create_queue("jobs")
        for i in range(5):
            jobs.send(f"job {i}")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}  # durableq's defaults decide
    return subprocess.run(
        [str(DURABLEQ), *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def spark_properties(event_log_dir: Path) -> dict[str, str]:
    """The Spark settings of the one application that wrote an event log in ``event_log_dir``."""
    [application] = list(event_log_dir.iterdir())  # one file, or (Spark 4) a folder of rolled files
    logs = sorted(application.rglob("events_*")) if application.is_dir() else [application]
    for line in "".join(log.read_text() for log in logs).splitlines():
        event = json.loads(line)
        if event["Event"] == "SparkListenerEnvironmentUpdate":
            return dict(event["Spark Properties"])
    raise AssertionError(f"no environment in {logs}")


@pytest.mark.slow
def test_analyze_is_quiet_and_takes_conf(small_db: Path, tmp_path: Path) -> None:
    events = tmp_path / "event-log"
    events.mkdir()
    done = run(
        "--db",
        str(small_db),
        "analyze",
        "--report",
        "depth",
        "--json",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir={events.as_uri()}",
        "--conf",
        "spark.eventLog.compress=false",
        "--conf",
        "spark.sql.shuffle.partitions=3",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["depth"][0]["visible"] == 5
    # No Spark or JVM chatter: not one WARN line (nor "Using Spark's default log4j profile" and co.).
    noise = ("WARN", "log4j", "log level")
    assert [line for line in done.stderr.splitlines() if any(word in line for word in noise)] == []
    # The settings reached the session (the event log exists at all because of them), beside durableq's:
    # the driver on loopback, and errors-only logging.
    properties = spark_properties(events)
    assert properties["spark.sql.shuffle.partitions"] == "3"
    assert properties["spark.driver.bindAddress"] == properties["spark.driver.host"] == "127.0.0.1"
    assert "-Dlog4j2.configurationFile=file:" in properties["spark.driver.extraJavaOptions"]


@pytest.mark.slow
def test_export_with_verbose_shows_sparks_warnings(small_db: Path, tmp_path: Path) -> None:
    done = run("--db", str(small_db), "export", "--verbose", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "messages" in done.stdout
    # Spark's own lines: its default log4j profile, and at least one of its start-up warnings.
    assert "WARN" in done.stderr


def test_conf_must_be_key_equals_value(small_db: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["--db", str(small_db), "analyze", "--conf", "spark.driver.memory"])
    assert bad.exit_code == 2 and "is not KEY=VALUE" in bad.output
    # A name that is no Spark setting, or the master given as a setting: one line, before any Spark.
    for given, words in (("driver.memory=4g", "start with 'spark.'"), ("spark.master=local", "--master")):
        refused = runner.invoke(main, ["--db", str(small_db), "export", "--conf", given, "out"])
        assert refused.exit_code == 1, refused.output
        assert refused.output.startswith("error: InvalidParameterValue: ") and words in refused.output
