"""Compile the modules of ``modules.txt`` with mypyc in place, or set the built modules aside.

In place, an editable install imports the compiled module: CPython's finder prefers an extension
module to the ``.py`` beside it.  The modules share one library, ``durableq/_hot__mypyc*.so``
(inside the package, so an editable install finds it as it finds the rest).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: Where ``pure`` keeps the built modules until ``compiled`` puts them back.
ASIDE = ROOT / "build" / "mypyc-aside"


def modules() -> list[str]:
    lines = (HERE / "modules.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    extensions = mypycify(modules(), opt_level="3", debug_level="1", group_name="durableq._hot")
    setup(name="durableq-mypyc-experiment", ext_modules=extensions, script_args=["build_ext", "--inplace"])


def move(source: Path, target: Path) -> None:
    for path in sorted(source.rglob("*.so")):
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, destination)


def main(command: str) -> None:
    if command == "build":
        build()
    elif command == "pure":
        move(ROOT / "durableq", ASIDE / "durableq")
    elif command == "compiled":
        move(ASIDE / "durableq", ROOT / "durableq")
    else:
        raise SystemExit(f"unknown command {command!r}: use build, pure or compiled")


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
