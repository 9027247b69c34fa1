"""An option in the wrong place: a global option (``--db``, ``--keyring``, ``--payload-dir``) after
the command, or a command's option (``--json``) before it, gets one line that shows where it goes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from durableq.cli import main


def _durableq(*args: str, cwd: Path) -> Result:
    """``durableq ARGS`` in the folder ``cwd`` (where a command would create ./durableq.db)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        result = CliRunner().invoke(main, list(args), prog_name="durableq", catch_exceptions=False)
    assert not (cwd / "durableq.db").exists()  # nothing ran, so nothing was created
    return result


def test_a_global_option_after_the_command_is_shown_before_it(tmp_path: Path) -> None:
    result = _durableq("stats", "--db", "f.db", cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: MisplacedOption: --db is an option of durableq itself; global options go before the "
        "command: durableq --db f.db stats\n"
    )
    assert not (tmp_path / "f.db").exists()


def test_the_hint_keeps_the_rest_of_the_line_and_the_spelling(tmp_path: Path) -> None:
    cases = {
        ("queue", "list", "--keyring", "my keys.json"): "durableq --keyring 'my keys.json' queue list",
        ("send", "jobs", "hi", "--payload-dir=big", "--delay", "5"): (
            "durableq --payload-dir=big send jobs hi --delay 5"
        ),
        (
            "--db",
            "a.db",
            "queue",
            "show",
            "jobs",
            "--db",
            "b.db",
        ): "durableq --db b.db --db a.db queue show jobs",
    }
    for args, hint in cases.items():
        result = _durableq(*args, cwd=tmp_path)
        assert result.exit_code == 2, args
        assert result.stderr.endswith(f"global options go before the command: {hint}\n"), result.stderr
        assert result.stderr.count("\n") == 1


def test_a_command_option_before_the_command_is_shown_after_it(tmp_path: Path) -> None:
    result = _durableq("--json", "queue", "list", cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: MisplacedOption: --json is an option of durableq queue list; a command's options go "
        "after its name: durableq queue list --json\n"
    )
    within = _durableq("queue", "--json", "list", cwd=tmp_path)  # refused by the group `queue`
    assert within.exit_code == 2
    assert within.stderr.endswith("after its name: durableq queue list --json\n")
    valued = _durableq("--db", "x.db", "--wait", "3", "receive", "jobs", cwd=tmp_path)
    assert valued.exit_code == 2
    assert valued.stderr.endswith("after its name: durableq --db x.db receive jobs --wait 3\n")


def test_an_unknown_option_is_still_clicks_usage_error(tmp_path: Path) -> None:
    for args in (("stats", "--nope"), ("--nope", "stats"), ("--json",)):
        result = _durableq(*args, cwd=tmp_path)
        assert result.exit_code == 2
        assert "No such option '--" in result.stderr and "MisplacedOption" not in result.stderr
