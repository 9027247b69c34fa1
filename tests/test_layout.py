"""The layout's rule (README, Development): one concept per module, none over about 400 lines.

A module that grows past the limit is split by concept (as W15's encryption cycles and W16's engines
were), not trimmed of its comments to fit.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The packages the rule covers: the library, the command line and the benchmark harness.
PACKAGES = ("durableq", "cli", "bench")
MAX_LINES = 400


def _lines(path: Path) -> int:
    """Lines as ``wc -l`` counts them: newline characters."""
    return path.read_bytes().count(b"\n")


def test_every_module_is_at_most_400_lines() -> None:
    modules = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    assert len(modules) > 50, f"found only {len(modules)} modules under {', '.join(PACKAGES)}"
    offenders = {
        str(path.relative_to(ROOT)): lines for path in modules if (lines := _lines(path)) > MAX_LINES
    }
    assert not offenders, f"modules over {MAX_LINES} lines (split them by concept): " + ", ".join(
        f"{name} ({lines})" for name, lines in offenders.items()
    )
