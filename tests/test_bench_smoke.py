"""Smoke test of the benchmark harness: it runs end to end and writes its report.

Never a timing assertion: this machine's speed is not the harness's business.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("matplotlib")
pytest.importorskip("psutil")


@pytest.mark.slow
def test_quick_run_writes_tables_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "results"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--rounds",
            "1",
            "--workloads",
            "1,4,6",
            "--out",
            str(out),
            "--scratch",
            str(tmp_path),
        ],
        check=False,  # the assertion below shows stderr
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    markdown = (out / "results.md").read_text(encoding="utf-8")

    for heading in ("## Targets of issues 8 and 15", "## Systems", "## W1:", "## W4:", "## W6:"):
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
