"""Outputs under a shared (setgid) folder come out group-writable, folders and files, whoever makes
them: the rule that lets executors running as another OS user write them (docs/analytics.md,
"Outputs on a cluster").  Here on a local session, by modes; test_cluster.py runs it with real users.
"""

from __future__ import annotations

import stat
from pathlib import Path

from pyspark.sql import SparkSession

from durableq.analytics import export_events, run_report
from durableq.analytics.outputs import UMASK_SETTING, shared

from . import history_traffic
from .scenario import Scenario


def modes(folder: Path) -> tuple[set[int], set[int]]:
    """The permission bits (with setgid) of the folders and of the files under ``folder``, itself too."""
    found = [folder, *folder.rglob("*")]
    return (
        {stat.S_IMODE(p.stat().st_mode) for p in found if p.is_dir()},
        {stat.S_IMODE(p.stat().st_mode) for p in found if p.is_file()},
    )


def setgid_folder(folder: Path) -> Path:
    folder.mkdir()
    folder.chmod(0o2775)
    return folder


def test_reports_written_under_a_setgid_folder_are_group_writable(
    spark: SparkSession, world: Scenario, tmp_path: Path
) -> None:
    group = setgid_folder(tmp_path / "group")
    run_report(world.path, "depth", spark=spark, out_dir=group / "reports", clock=world.clock)
    assert modes(group / "reports") == ({0o2775}, {0o664})
    assert spark.conf.get(UMASK_SETTING, None) is None  # the session is left as it was


def test_an_incremental_export_under_a_setgid_folder_is_group_writable(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "q.db"
    clock = history_traffic.build(path, rounds=1)
    group = setgid_folder(tmp_path / "group")
    # The folders durableq makes (history/, history/events) as well as Spark's.
    rows = export_events(path, group / "history", spark=spark, clock=clock)
    assert all(r["rows"] > 0 for r in rows)
    assert modes(group / "history") == ({0o2775}, {0o664})


def test_shared_means_the_nearest_existing_folder_has_the_setgid_bit(tmp_path: Path) -> None:
    group = setgid_folder(tmp_path / "group")
    assert shared(group) and shared(group / "not" / "made" / "yet")
    assert not shared(tmp_path / "plain" / "not" / "made")
    assert not shared("s3a://bucket/reports")
