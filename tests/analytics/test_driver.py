"""Finding the SQLite JDBC driver: argument, environment variable, system location, or a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from durableq.analytics import JdbcDriverNotFound, QueueAnalytics, find_jdbc_jar
from durableq.analytics.driver import SQLITE

from . import scenario


@pytest.fixture
def jars(tmp_path: Path) -> tuple[Path, Path]:
    given, system = tmp_path / "given.jar", tmp_path / "system.jar"
    given.write_bytes(b"PK")
    system.write_bytes(b"PK")
    return given, system


def test_the_argument_comes_first(jars: tuple[Path, Path], tmp_path: Path) -> None:
    given, system = jars
    env = {SQLITE.variable: str(system)}
    assert find_jdbc_jar(given, environ=env, system_jar=system) == given.resolve()


def test_then_the_environment_variable(jars: tuple[Path, Path], tmp_path: Path) -> None:
    given, system = jars
    assert find_jdbc_jar(environ={SQLITE.variable: str(given)}, system_jar=system) == given.resolve()


def test_then_the_system_location(jars: tuple[Path, Path]) -> None:
    _, system = jars
    assert find_jdbc_jar(environ={SQLITE.variable: ""}, system_jar=system) == system.resolve()


@pytest.mark.parametrize("source", ["argument", "variable"])
def test_a_named_jar_that_is_missing_is_an_error_not_a_fallback(
    jars: tuple[Path, Path], tmp_path: Path, source: str
) -> None:
    _, system = jars
    missing = tmp_path / "typo.jar"
    kwargs = {"jdbc_jar": missing} if source == "argument" else {"environ": {SQLITE.variable: str(missing)}}
    with pytest.raises(JdbcDriverNotFound, match=r"typo\.jar"):
        find_jdbc_jar(system_jar=system, **kwargs)  # type: ignore[arg-type]


def test_no_driver_anywhere_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(JdbcDriverNotFound) as caught:
        find_jdbc_jar(environ={}, system_jar=tmp_path / "none.jar")
    message = str(caught.value)
    for hint in ("libxerial-sqlite-jdbc-java", "org.xerial:sqlite-jdbc", "Maven Central", SQLITE.variable):
        assert hint in message
    assert caught.value.code == "JdbcDriverNotFound"


def test_open_fails_fast_without_a_driver(world: scenario.Scenario, tmp_path: Path) -> None:
    with pytest.raises(JdbcDriverNotFound):
        QueueAnalytics.open(world.path, jdbc_jar=tmp_path / "none.jar", snapshot_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no snapshot was copied
