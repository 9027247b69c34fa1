"""docs/analytics.md: every command its shell examples show runs as written (on a file with
queues, for the commands that name one), and every output block it marks matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from .markdown import Bindings, blocks, compare
from .shell import ROOT, Shell

DOC = ROOT / "docs" / "analytics.md"


@pytest.mark.slow
def test_the_commands_of_the_analytics_docs(tmp_path: Path, sample_db: Path) -> None:
    shell = Shell(tmp_path, sample_db)
    shown = [b for b in blocks(DOC) if b.lang == "sh"]
    assert any("durableq" in b.text for b in shown)
    for block in shown:
        printed = shell.run(block)
        if block.output is not None:
            excerpt = block.output.output_of_previous == "excerpt"
            compare(block.output.text, printed, Bindings(), excerpt=excerpt, what=f"{DOC.name} {block.label}")
