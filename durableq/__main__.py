"""``python -m durableq``: the command line, the same as the ``durableq`` executable.

The CLI (and click) is imported here only, so ``import durableq`` stays light.
"""

from __future__ import annotations

import importlib

if __name__ == "__main__":
    # The repository's cli/ folder, installed as durableq.cli (pyproject.toml, package-dir): imported
    # by name, as the type checker reads durableq from the source tree, where it has no cli module.
    cli = importlib.import_module("durableq.cli")
    # click would name the program after this file (``__main__.py``) in usage lines.
    cli.main(prog_name="durableq")
