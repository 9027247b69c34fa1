"""The durableq command line (installed as ``durableq.cli``)."""

from __future__ import annotations


def main() -> None:  # replaced by the click application in the CLI issue
    raise SystemExit("the durableq command line is not built yet")
