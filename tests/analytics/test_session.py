"""Whoever configured Spark first wins: a running session, or spark-submit's master, name and settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from durableq.analytics import QueueAnalytics
from durableq.errors import InvalidParameterValue

from . import scenario

ROOT = Path(__file__).resolve().parents[2]
#: PySpark's own launcher (the pip package ships Spark's bin/ scripts and jars).
SPARK_HOME = Path(pyspark.__file__).resolve().parent


def spark_environment() -> dict[str, str]:
    """The environment for Spark's scripts: this Spark, and this Python for the driver and the workers."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def test_a_master_that_contradicts_the_running_session_is_refused(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path
) -> None:
    running = spark.sparkContext.master
    with pytest.raises(InvalidParameterValue, match="already running on master"):
        QueueAnalytics.open(world.path, master="spark://elsewhere:7077", snapshot_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
    # The same master is no contradiction.
    with QueueAnalytics.open(world.path, master=running, clock=world.clock) as analytics:
        assert analytics.spark is spark


@pytest.mark.slow
def test_under_spark_submit_its_master_name_and_settings_win(world: scenario.Scenario) -> None:
    done = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            "local[2]",
            "--name",
            "nightly-queue-report",
            "--conf",
            "spark.sql.shuffle.partitions=3",
            "--conf",
            "spark.ui.enabled=false",
            str(ROOT / "examples" / "analytics_job.py"),
            str(world.path),
        ],
        env=spark_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, taken, *table = done.stdout.strip().splitlines()
    # spark-submit's master, name and setting; durableq's time zone (nobody gave one) and driver jar
    # (no --jars given): the depth table could not have been read without it.
    assert first == "application nightly-queue-report on local[2] (shuffle partitions 3, time zone UTC)"
    assert taken.startswith("snapshot taken at ")
    queues = {line.split("|")[1].strip() for line in table if line.startswith("|") and "queue" not in line}
    assert queues == set(scenario.QUEUE_NAMES)
