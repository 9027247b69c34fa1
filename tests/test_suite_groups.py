"""The suite's worker groups (tests/conftest.py): under ``make test``'s two pytest-xdist workers, the
tests that share an expensive fixture stay on one worker, so it still starts once per run."""

from __future__ import annotations

from pathlib import Path

from .conftest import XDIST_GROUPED_BY_MODULE, XDIST_GROUPS, XDIST_UNGROUPED, xdist_group

ROOT = Path(__file__).resolve().parents[1]


def test_the_tests_sharing_spark_a_browser_or_a_server_are_grouped() -> None:
    assert xdist_group("tests/analytics/test_frames.py::test_states[x]") == "spark"
    assert xdist_group("tests/analytics/test_docs.py::test_sessions[spark.md]") == "spark"
    assert xdist_group("tests/dashboard/test_browser.py::test_page[sqlite]") == "browser"
    # One group per endpoint module: its module-scoped servers start once, modules still spread.
    assert xdist_group("tests/server/test_sigv4.py::test_a[sqlite]") == "tests/server/test_sigv4.py"
    assert xdist_group("tests/server/test_fuzz.py::test_b") == "tests/server/test_fuzz.py"
    # Everything else goes to whichever worker is free, one test at a time.
    assert xdist_group("tests/test_queues.py::test_tags[sqlite]") is None
    assert xdist_group("tests/reliability/test_crash.py::test_x[postgresql]") is None
    assert xdist_group("tests/cli/test_server.py::test_y") is None  # not tests/server/
    # Spark in processes of their own, not the shared session: any worker.
    assert xdist_group("tests/analytics/test_cluster.py::test_reports_and_exports") is None
    assert xdist_group("tests/analytics/test_quiet.py::test_analyze_is_quiet") is None


def test_every_grouped_folder_holds_tests() -> None:
    # A folder renamed or moved would silently lose its group (and start its fixture on each worker).
    for folder in (*XDIST_GROUPS, *XDIST_GROUPED_BY_MODULE):
        assert list((ROOT / folder).glob("test_*.py")), f"{folder} holds no test module"
    for module in XDIST_UNGROUPED:
        assert (ROOT / module.removesuffix("::")).is_file(), module
