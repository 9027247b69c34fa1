"""The package without its extra, its public names, and the rule it shares with the library."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import durableq.analytics
from durableq.analytics import STATES
from durableq.analytics.frames import messages_query
from durableq.engines.dialect import SQLITE
from durableq.ops.states import STATE_SQL

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.modules[{blocked!r}] = None  # as if not installed
try:
    {code}
except ImportError as exc:
    print(type(exc).__name__, exc.name, exc, sep="|")
"""


def probe(blocked: str, code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(blocked=blocked, code=code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().split("|")


def test_importing_without_pyspark_says_what_to_install() -> None:
    kind, name, message = probe("pyspark", "import durableq.analytics")
    assert (kind, name) == ("SparkExtraMissing", "pyspark")
    assert "pip install 'durableq[spark]'" in message


def test_plotting_without_matplotlib_says_what_to_install(tmp_path: Path) -> None:
    target = str(tmp_path / "x.png")
    code = f"from durableq.analytics import write_activity_png; write_activity_png([], {target!r})"
    kind, name, message = probe("matplotlib", code)
    assert (kind, name) == ("SparkExtraMissing", "matplotlib")
    assert "pip install 'durableq[spark]'" in message
    assert not (tmp_path / "x.png").exists()


def test_all_lists_exactly_the_public_names() -> None:
    public = {n for n in vars(durableq.analytics) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(durableq.analytics, n)).__name__ == "module"}
    assert sorted(durableq.analytics.__all__) == sorted(public - modules - {"annotations", "pyspark"})


def test_states_are_the_values_of_the_library_classification() -> None:
    assert set(STATES) == set(re.findall(r"(?:THEN|ELSE) '(\w+)'", STATE_SQL))


def test_the_query_carries_the_snapshot_time_in_place_of_now() -> None:
    query = messages_query(SQLITE, 4_300_000_123_456)
    assert ":now" not in query
    assert query.count("4300000123456") == STATE_SQL.count(":now") + 1  # the states, and the expiry rule
