"""``python -m tests.reliability.launch CONFIG_JSON``: run one role in this process.

The journal's first line says which role runs and which queues it receives
from; its last line, ``stop``, is written only by a run that ended cleanly,
so the checker knows which runs were killed.
"""

from __future__ import annotations

import json
import os
import sys

from . import (
    outbox,  # noqa: F401 - registers the transaction roles (issue 29)
    tasks,  # noqa: F401 - registers the one-shot roles
)
from .hostile import role as _hostile  # noqa: F401 - registers the hostile-mix roles
from .journal import Journal
from .roles import ROLES


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    journal = Journal(config["journal"])
    receives_from = [config["queue"]] if "queue" in config else []
    if config["role"] == "mixed":
        receives_from = [q["name"] for q in config["queues"]]
    journal.write("start", role=config["role"], pid=os.getpid(), receives_from=receives_from)
    ROLES[config["role"]](config, journal)
    journal.write("stop")


if __name__ == "__main__":
    main(sys.argv)
