"""The package builds without setuptools warnings about its metadata, and carries its licence."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What a clean clone does not have (or the build must not see).
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache", "*.db*"
)


def test_the_licence_is_an_spdx_expression_with_its_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"  # PEP 639: a string, not the deprecated table
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")


@pytest.mark.slow
def test_a_wheel_builds_without_deprecation_warnings(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    # A fresh build environment, as `pip install .` makes one: the setuptools that
    # pyproject.toml asks for, from the package index.
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-v",
            "-w",
            str(tmp_path / "wheels"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    output = built.stdout + built.stderr
    assert "Deprecat" not in output and "deprecat" not in output, output
    [wheel] = (tmp_path / "wheels").glob("durableq-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))
        licence = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert b"License-Expression: MIT" in metadata
    assert licence
    # Every module of the package, the CLI and the migrations is in the wheel (a package missing from
    # pyproject.toml's list would be left out, and an installed durableq would fail to import it).
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.endswith(".py")}
    sources = {f"durableq/{p.relative_to(ROOT / 'durableq')}" for p in (ROOT / "durableq").rglob("*.py")}
    for folder in ("cli", "migrations"):
        sources |= {
            f"durableq/{folder}/{p.relative_to(ROOT / folder)}" for p in (ROOT / folder).rglob("*.py")
        }
    assert sources - shipped == set(), f"left out of the wheel: {sorted(sources - shipped)}"
    # ... and the files that are not Python: the log4j2 settings of a quiet Spark session.
    with zipfile.ZipFile(wheel) as archive:
        assert "durableq/analytics/log4j2-quiet.properties" in archive.namelist()
