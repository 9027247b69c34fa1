"""``python -m bench.endpoint``: W9 alone (the same as ``python -m bench --workloads 9``)."""

from __future__ import annotations

import sys

from ..__main__ import main

if __name__ == "__main__":
    sys.exit(main(["--workloads", "9", *sys.argv[1:]]))
