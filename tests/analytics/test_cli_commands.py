"""``durableq analyze`` and ``durableq export``: the command line over the analytics."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from durableq.cli import main
from pyspark.sql import SparkSession

from durableq.analytics import run_report

from . import scenario


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


def test_analyze_prints_what_the_library_reports(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path
) -> None:
    plot, out = tmp_path / "activity.png", tmp_path / "reports"
    output = _run(
        "--db",
        str(world.path),
        "analyze",
        "--report",
        "depth",
        "--json",
        "--plot",
        str(plot),
        "--out",
        str(out),
    )
    printed = json.loads(output)
    direct = run_report(world.path, "depth", spark=spark)
    assert printed["depth"] == json.loads(json.dumps(direct["depth"], default=str))
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert list((out / "depth").glob("*.parquet"))
    assert spark.read.parquet(str(out / "depth")).count() == len(direct["depth"])


def test_analyze_one_queue_as_a_table(spark: SparkSession, world: scenario.Scenario) -> None:
    queue = sorted(row["queue"] for row in run_report(world.path, "depth", spark=spark)["depth"])[0]
    output = _run("--db", str(world.path), "analyze", queue, "--report", "age")
    assert "ages" in output and queue in output and "p99" in output


def test_export_writes_the_tables_as_parquet(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path
) -> None:
    target = tmp_path / "export"
    written = json.loads(
        _run("--db", str(world.path), "export", "--format", "parquet", str(target), "--json")
    )
    assert [w["table"] for w in written] == ["messages", "queues", "metrics", "snapshot"]
    assert spark.read.parquet(str(target / "messages")).count() == written[0]["rows"]
    refused = _run("--db", str(world.path), "export", str(target), code=1)
    assert refused.startswith("error: ") and "already exist" in refused


def test_a_missing_jar_is_one_line(world: scenario.Scenario, tmp_path: Path) -> None:
    output = _run("--db", str(world.path), "analyze", "--jar", str(tmp_path / "none.jar"), code=1)
    assert output.count("\n") == 1 and "JdbcDriverNotFound" in output
