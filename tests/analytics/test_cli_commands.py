"""``durableq analyze`` and ``durableq export``: the command line over the analytics."""

from __future__ import annotations

import json
from datetime import UTC, datetime
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


def test_analyze_takes_the_snapshot_dir_partitions_and_window(
    spark: SparkSession, world: scenario.Scenario, tmp_path: Path
) -> None:
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    since, until = "2106-04-06T12:27", "2106-04-06T12:29:30+00:00"
    printed = json.loads(
        _run(
            "--db",
            str(world.path),
            "analyze",
            "--report",
            "receives",
            "--json",
            "--snapshot-dir",
            str(snapshots),
            "--partitions",
            "2",
            "--since",
            since,
            "--until",
            until,
        )
    )
    window = {
        "since": datetime(2106, 4, 6, 12, 27, tzinfo=UTC),
        "until": datetime(2106, 4, 6, 12, 29, 30, tzinfo=UTC),
    }
    direct = run_report(world.path, "receive-counts", spark=spark, **window)  # type: ignore[arg-type]
    assert printed["receive-counts"] == direct["receive-counts"]
    everything = run_report(world.path, "receive-counts", spark=spark)["receive-counts"]
    assert sum(r["messages"] for r in direct["receive-counts"]) < sum(r["messages"] for r in everything)
    assert list(snapshots.iterdir()) == []  # the copy went there, and is gone


def test_bad_window_and_partitions_are_one_line(world: scenario.Scenario) -> None:
    usage = _run("--db", str(world.path), "analyze", "--since", "yesterday", code=2)
    assert "ISO 8601" in usage
    refused = _run("--db", str(world.path), "analyze", "--partitions", "0", code=1)
    assert refused.startswith("error: InvalidParameterValue") and refused.count("\n") == 1
    reversed_window = _run(
        "--db",
        str(world.path),
        "export",
        "out",
        "--since",
        "2106-04-06T13:00",
        "--until",
        "2106-04-06T12:00",
        code=1,
    )
    assert "earlier than until" in reversed_window


def test_history_reports_and_the_incremental_export(spark: SparkSession, tmp_path: Path) -> None:
    from . import history_traffic

    path = tmp_path / "history.db"
    history_traffic.build(path, rounds=1)
    printed = json.loads(_run("--db", str(path), "analyze", "--report", "retries", "--json"))
    assert [r["queue"] for r in printed["retries"]] == ["jobs", "jobs-dlq"]  # "plain" keeps no history
    assert printed["retries"] == json.loads(json.dumps(run_report(path, "retries", spark=spark)["retries"]))
    out = tmp_path / "history"
    rows = json.loads(_run("--db", str(path), "export", "--incremental", str(out), "--json"))
    assert [r["table"] for r in rows] == ["events", "audit"] and rows[0]["rows"] > 0
    again = json.loads(_run("--db", str(path), "export", "--incremental", str(out), "--json"))
    assert [r["rows"] for r in again] == [0, 0]
    assert [r["checkpoint"] for r in again] == [r["checkpoint"] for r in rows]
    refused = _run("--db", str(path), "export", "--incremental", str(out), "--since", "2h", code=1)
    assert (
        refused == "error: InvalidParameterValue: --incremental exports everything after its "
        "checkpoint; leave out --since\n"
    )
