"""Smoke test of the benchmark harness: it runs end to end and writes its report.

Never a timing assertion: this machine's speed is not the harness's business.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("matplotlib")
pytest.importorskip("psutil")


@pytest.mark.slow
def test_quick_run_writes_tables_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    completed = _quick_run("1,4,6", out, tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr
    markdown = (out / "results.md").read_text(encoding="utf-8")

    for heading in ("## Targets of issues 8, 15 and 30", "## Systems", "## W1:", "## W4:", "## W6:"):
        assert heading in markdown
    # One row per system and case; peers that are not installed still get their row.
    for case in ("durability=normal", "durability=full"):
        for system in ("floor", "durableq", "persistqueue", "litequeue"):
            assert f"| {case} | {system} | throughput |" in markdown
    assert "| 2+2 processes | durableq | duplicates in window |" in markdown
    assert "| durableq | wake-up p99 |" in markdown
    # A target of a workload that ran is judged; one that did not says so.
    assert "| W1 durability=normal: durableq ≥ 0.7× floor |" in markdown
    assert "| W7: consumer memory flat in the backlog |" in markdown and "not run" in markdown

    plots = sorted(p.name for p in out.glob("*.png"))
    assert plots == ["w1.png", "w4.png", "w6.png"]
    assert all((out / p).stat().st_size > 0 for p in plots)
    assert not list(tmp_path.glob("durableq-bench-*")), "the scratch files are removed after the run"


@pytest.mark.slow
def test_quick_postgres_workload_writes_its_table(tmp_path: Path) -> None:
    """W16 starts its own PostgreSQL cluster in the scratch folder, compares the engines, and stops it."""
    out = tmp_path / "results"
    # Under root the server runs as 'postgres', which must reach its data: pytest's tmp_path is
    # private to root, so the scratch folder is one of the system temp folder's own.
    scratch = Path(tempfile.mkdtemp(prefix="durableq-smoke-"))
    scratch.chmod(0o711)
    try:
        completed = _quick_run("16", out, scratch, timeout=180)
        left = list(scratch.glob("durableq-bench-*"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert completed.returncode == 0, completed.stderr
    markdown = (out / "results.md").read_text(encoding="utf-8")

    assert "## W16:" in markdown
    for durability in ("full", "normal"):
        for workers in ("1 worker", "4 workers"):
            for system in ("sqlite", "postgresql"):
                for metric in ("throughput", "errors", "received twice", "lost"):
                    assert f"| durability={durability}, {workers} | {system} | {metric} |" in markdown
    for depth in ("~0", "500", "2k"):
        for system in ("sqlite", "postgresql"):
            assert f"| backlog {depth} | {system} | receive p99 |" in markdown
    assert "tembo.io" in markdown  # pgmq's published figures, with their source
    assert sorted(p.name for p in out.glob("*.png")) == ["w16.png"]
    assert not left, "the scratch files and the cluster are removed"


@pytest.mark.slow
def test_quick_outbox_workload_writes_its_table(tmp_path: Path) -> None:
    """W17 (issue 29): a row and its job in one transaction, two commits, the bare insert, per engine."""
    out = tmp_path / "results"
    scratch = Path(tempfile.mkdtemp(prefix="durableq-smoke-"))  # (reachable by the server: see W16's)
    scratch.chmod(0o711)
    try:
        completed = _quick_run("17", out, scratch, timeout=180)
        left = list(scratch.glob("durableq-bench-*"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert completed.returncode == 0, completed.stderr
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "## W17:" in markdown
    for engine in ("sqlite", "postgresql"):
        for durability in ("full", "normal"):
            for system in ("bare insert", "two commits", "one transaction", "one transaction (own)"):
                assert f"| {engine}, durability={durability} | {system} | throughput |" in markdown
    assert "one transaction / two commits" in markdown
    assert not left, "the scratch files and the cluster are removed"


def _quick_run(workloads: str, out: Path, scratch: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m bench --quick --rounds 1 --workloads WORKLOADS`` (the caller's assertion shows stderr)."""
    command = ["-m", "bench", "--quick", "--rounds", "1", "--workloads", workloads]
    return subprocess.run(
        [sys.executable, *command, "--out", str(out), "--scratch", str(scratch)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_quick_pgmq_workload_writes_its_table(tmp_path: Path) -> None:
    """W19 (issue 30): durableq against pgmq (its SQL functions, installed from bench/peers/pgmq.sql in
    the workload's own cluster) and the minimal SQL floor; receive latency against SQLite's."""
    out = tmp_path / "results"
    scratch = Path(tempfile.mkdtemp(prefix="durableq-smoke-"))  # (reachable by the server: see W16's)
    scratch.chmod(0o711)
    try:
        completed = _quick_run("19", out, scratch, timeout=240)
        left = list(scratch.glob("durableq-bench-*"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert completed.returncode == 0, completed.stderr
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "## W19:" in markdown
    for system in ("minimal", "pgmq", "durableq"):  # (--quick: 1 worker; a full run adds 4)
        assert f"| 1 worker | {system} | throughput |" in markdown
    for system in ("sqlite", "postgresql", "SELECT 1 round trip"):
        assert f"| backlog ~0 | {system} | receive p50 |" in markdown
    assert "| W19 1 worker: durableq ahead of pgmq |" in markdown and "pgmq 1.5.1" in markdown
    assert not left, "the scratch files and the cluster are removed"
