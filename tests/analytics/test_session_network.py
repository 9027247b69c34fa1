"""A Spark session durableq starts itself listens on loopback only, and takes ``conf`` settings."""

from __future__ import annotations

import os

import psutil
import pytest
from pyspark.sql import SparkSession

from durableq.analytics.session import LOOPBACK, own_session_conf

#: The addresses that are loopback, as a socket reports them (IPv4, and IPv4 mapped into IPv6).
LOOPBACK_ADDRESSES = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def spark_jvms() -> list[psutil.Process]:
    """The JVMs this test process started (PySpark's gateway: a child running Spark's SparkSubmit)."""
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if child.name() == "java" and "org.apache.spark.deploy.SparkSubmit" in child.cmdline()
    ]


def test_the_session_durableq_starts_listens_on_loopback_only(spark: SparkSession) -> None:
    assert spark.conf.get("spark.driver.bindAddress") == LOOPBACK
    assert spark.conf.get("spark.driver.host") == LOOPBACK
    # Something ran, so the block manager (which serves cached blocks) is up, not only the RPC endpoint.
    assert spark.range(100).repartition(3).groupBy().count().first() is not None
    [jvm] = spark_jvms()
    listening = [c.laddr for c in jvm.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert len(listening) >= 2  # the driver's RPC endpoint and its block manager, at least
    assert {address.ip for address in listening} <= LOOPBACK_ADDRESSES, listening


def test_loopback_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert own_session_conf("local[*]", {})["spark.driver.bindAddress"] == LOOPBACK
    assert own_session_conf("local-cluster[2,1,1024]", {})["spark.driver.host"] == LOOPBACK
    # A cluster's executors must reach the driver: its address is Spark's (or SPARK_LOCAL_IP's) to pick.
    assert "spark.driver.host" not in own_session_conf("spark://host:7077", {})
    # Either setting given: both are the user's.
    given = own_session_conf("local[2]", {"spark.driver.bindAddress": "0.0.0.0"})
    assert given["spark.driver.bindAddress"] == "0.0.0.0" and "spark.driver.host" not in given
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.2")
    assert "spark.driver.bindAddress" not in own_session_conf("local[2]", {})
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.2"
